package distribute

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
	"switchyard.dev/switchyard/controller/compute"
)

// DefaultLogSize is how many events a node's log holds: the history a
// reconnecting node can resume from, and how far a slow node may lag before
// it is resnapshotted.
const DefaultLogSize = 8192

// DefaultRetain is how long a node's log is kept after its last stream
// closed, so a briefly disconnected node can resume instead of resyncing.
const DefaultRetain = 5 * time.Minute

// Hub fans engine events out into per-node logs. It implements compute.Sink.
type Hub struct {
	engine  *compute.Engine
	log     *slog.Logger
	logSize int
	// Retain: see DefaultRetain. Set before the first Serve.
	Retain time.Duration

	mu     sync.Mutex
	nodes  map[string]*nodeLog
	epochs uint64
	start  int64

	lastPol   *compute.Policy
	lastProto *apiv1.Policy
	// The engine emits one event to every node in a span in a row, sharing
	// its member slices; the converted payload is shared the same way.
	lastKey     evKey
	lastPayload any
}

type evKey struct {
	typ    compute.EventType
	group  compute.GroupID
	added  *compute.Member
	remove *compute.Member
	policy *compute.Policy
	uid    string
}

func keyOf(ev compute.Event) evKey {
	k := evKey{typ: ev.Type, group: ev.Group, policy: ev.Policy, uid: ev.PolicyUID}
	if len(ev.Added) > 0 {
		k.added = &ev.Added[0]
	}
	if len(ev.Removed) > 0 {
		k.remove = &ev.Removed[0]
	}
	return k
}

var _ compute.Sink = (*Hub)(nil)

type nodeLog struct {
	epoch  string
	base   uint64 // version of events[0]
	next   uint64 // version the next event gets
	events []*apiv1.WatchEvent
	wake   chan struct{} // closed when an event is appended
	// streams counts open Watch streams; idle is bumped whenever it drops
	// to zero, so a pending expiry can tell it was overtaken.
	streams int
	idle    uint64
	// sent is the version the node's furthest stream will send next:
	// next-sent events are waiting for it (its lag).
	sent uint64
}

// NodeStream is one node's distribution state (the per-node metrics).
type NodeStream struct {
	Node string
	// Streams is how many Watch streams the node has open (0: its log is
	// kept for a resume, DefaultRetain).
	Streams int
	// Lag is how many events the node's log holds that no stream of it
	// has sent yet.
	Lag uint64
}

// Streams reports every node the hub holds a log for.
func (h *Hub) Streams() []NodeStream {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]NodeStream, 0, len(h.nodes))
	for n, nl := range h.nodes {
		lag := uint64(0)
		if nl.next > nl.sent {
			lag = nl.next - nl.sent
		}
		out = append(out, NodeStream{Node: n, Streams: nl.streams, Lag: lag})
	}
	return out
}

// NewHub creates a hub and registers it as the engine's sink. logSize <= 0
// means DefaultLogSize.
func NewHub(e *compute.Engine, log *slog.Logger, logSize int) *Hub {
	if logSize <= 0 {
		logSize = DefaultLogSize
	}
	if log == nil {
		log = slog.Default()
	}
	h := &Hub{engine: e, log: log, logSize: logSize, Retain: DefaultRetain, nodes: map[string]*nodeLog{}, start: time.Now().UnixNano()}
	e.SetSink(h)
	return h
}

// Emit appends an event to a node's log. Called by the engine with its lock
// held; it never blocks on a stream.
func (h *Hub) Emit(node string, ev compute.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	nl := h.nodes[node]
	if nl == nil {
		return
	}
	var w *apiv1.WatchEvent
	if k := keyOf(ev); k == h.lastKey && h.lastPayload != nil && (k.added != nil || k.remove != nil || k.policy != nil) {
		w = &apiv1.WatchEvent{}
		setPayload(w, h.lastPayload)
	} else {
		w = toEvent(ev, h.policyProto)
		h.lastKey, h.lastPayload = k, payloadOf(w)
	}
	w.Epoch, w.Version = nl.epoch, nl.next
	nl.next++
	if len(nl.events) >= h.logSize {
		nl.events[0] = nil
		nl.events = nl.events[1:]
		nl.base++
	}
	nl.events = append(nl.events, w)
	close(nl.wake)
	nl.wake = make(chan struct{})
}

// policyProto converts a published policy, remembering the last one because
// the engine emits the same policy to many nodes in a row.
func (h *Hub) policyProto(p *compute.Policy) *apiv1.Policy {
	if p != h.lastPol {
		h.lastPol, h.lastProto = p, toPolicy(p)
	}
	return h.lastProto
}

// open returns the node's log, creating it and starting the engine watch on
// first use, and calls snap with a snapshot consistent with version
// snapVersion (every later event has a higher version).
func (h *Hub) open(node string, snap func(s compute.NodeSnapshot, epoch string, snapVersion uint64, nl *nodeLog)) {
	h.mu.Lock()
	nl := h.nodes[node]
	created := nl == nil
	if created {
		h.epochs++
		nl = &nodeLog{epoch: strconv.FormatInt(h.start, 36) + "-" + strconv.FormatUint(h.epochs, 10), next: 1, base: 1, wake: make(chan struct{})}
		h.nodes[node] = nl
	}
	h.mu.Unlock()
	fn := func(s compute.NodeSnapshot) {
		h.mu.Lock()
		defer h.mu.Unlock()
		snap(s, nl.epoch, nl.next-1, nl)
	}
	if created {
		// The engine emits nothing for node until Watch, so no event can
		// slip in between creating the log and taking the snapshot.
		h.engine.Watch(node, fn)
		return
	}
	h.engine.SnapshotFunc(node, fn)
}

func snapshotEvents(s compute.NodeSnapshot, epoch string, version uint64, reason string) []*apiv1.WatchEvent {
	evs := []*apiv1.WatchEvent{{Event: &apiv1.WatchEvent_Reset_{Reset_: &apiv1.Reset{Reason: reason}}}}
	for _, g := range s.AppliedToGroups {
		evs = append(evs, &apiv1.WatchEvent{Event: &apiv1.WatchEvent_AppliedToGroupUpsert{AppliedToGroupUpsert: &apiv1.Group{Id: uint32(g.ID), Members: toMembers(g.Members)}}})
	}
	for _, g := range s.AddressGroups {
		evs = append(evs, &apiv1.WatchEvent{Event: &apiv1.WatchEvent_AddressGroupUpsert{AddressGroupUpsert: &apiv1.Group{Id: uint32(g.ID), Members: toMembers(g.Members)}}})
	}
	for _, p := range s.Policies {
		evs = append(evs, &apiv1.WatchEvent{Event: &apiv1.WatchEvent_PolicyUpsert{PolicyUpsert: toPolicy(p)}})
	}
	evs = append(evs, &apiv1.WatchEvent{Event: &apiv1.WatchEvent_Synced{Synced: &apiv1.Synced{}}})
	for _, ev := range evs {
		ev.Epoch, ev.Version = epoch, version
	}
	return evs
}

// Serve streams node's span to send until ctx ends or send fails. A resume
// position (epoch, version: the last version the node applied) is honoured
// when the log still holds every later event.
func (h *Hub) Serve(ctx context.Context, node, resumeEpoch string, resumeVersion uint64, send func(*apiv1.WatchEvent) error) error {
	var cursor uint64
	var nl *nodeLog
	var first []*apiv1.WatchEvent
	reason := "new stream"
	if resumeEpoch != "" {
		reason = "history for version " + strconv.FormatUint(resumeVersion, 10) + " of epoch " + resumeEpoch + " is no longer held"
	}
	h.mu.Lock()
	if cur := h.nodes[node]; cur != nil && resumeEpoch == cur.epoch && resumeVersion+1 >= cur.base && resumeVersion < cur.next {
		nl, cursor = cur, resumeVersion+1
		nl.streams++
		first = []*apiv1.WatchEvent{
			{Epoch: nl.epoch, Version: resumeVersion, Event: &apiv1.WatchEvent_Resumed{Resumed: &apiv1.Resumed{}}},
			{Epoch: nl.epoch, Version: resumeVersion, Event: &apiv1.WatchEvent_Synced{Synced: &apiv1.Synced{}}},
		}
	}
	h.mu.Unlock()
	if nl == nil {
		h.open(node, func(s compute.NodeSnapshot, epoch string, v uint64, l *nodeLog) {
			nl, cursor = l, v+1
			nl.streams++
			first = snapshotEvents(s, epoch, v, reason)
		})
	}
	h.log.Info("node watch started", "node", node, "epoch", nl.epoch, "resumed", first[0].GetResumed() != nil, "fromVersion", cursor)
	defer h.release(node, nl)
	for _, ev := range first {
		if err := send(ev); err != nil {
			return err
		}
	}
	for {
		h.mu.Lock()
		nl.sent = cursor
		if cursor < nl.base {
			h.mu.Unlock()
			h.log.Warn("node fell behind its event log; sending a fresh snapshot", "node", node, "version", cursor, "oldestHeld", nl.base)
			var evs []*apiv1.WatchEvent
			h.open(node, func(s compute.NodeSnapshot, epoch string, v uint64, _ *nodeLog) {
				cursor = v + 1
				evs = snapshotEvents(s, epoch, v, fmt.Sprintf("node too slow: more than %d events behind", h.logSize))
			})
			for _, ev := range evs {
				if err := send(ev); err != nil {
					return err
				}
			}
			continue
		}
		if cursor < nl.next {
			batch := append([]*apiv1.WatchEvent(nil), nl.events[cursor-nl.base:]...)
			h.mu.Unlock()
			for _, ev := range batch {
				if err := send(ev); err != nil {
					return err
				}
			}
			cursor += uint64(len(batch))
			continue
		}
		wake := nl.wake
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// release ends one stream of nl and, when it was the last, schedules the
// log's expiry: the engine stops emitting for the node and the history goes.
func (h *Hub) release(node string, nl *nodeLog) {
	h.mu.Lock()
	defer h.mu.Unlock()
	nl.streams--
	if nl.streams > 0 {
		return
	}
	nl.idle++
	idle := nl.idle
	time.AfterFunc(h.Retain, func() {
		h.mu.Lock()
		expired := h.nodes[node] == nl && nl.streams == 0 && nl.idle == idle
		if expired {
			delete(h.nodes, node)
		}
		h.mu.Unlock()
		if expired {
			// A new log for node may exist by now; it took its own Watch,
			// so this Unwatch only ends the expired log's.
			h.engine.Unwatch(node)
			h.log.Info("node log expired", "node", node, "idleFor", h.Retain)
		}
	})
}

// Nodes returns how many node logs are held.
func (h *Hub) Nodes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.nodes)
}
