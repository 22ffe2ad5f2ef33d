package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/flowstore"
	"switchyard.dev/switchyard/host/kube"
	"switchyard.dev/switchyard/host/metrics"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
)

// Switch is the OpenFlow side the agent needs (*openflow.Conn).
type Switch interface {
	Bundle(ctx context.Context, msgs []openflow.Message, atomic bool) error
	Send(ctx context.Context, m openflow.Message) error
	// Request sends m and waits for its reply or, for messages without one,
	// for the barrier after it (so its error is known).
	Request(ctx context.Context, m openflow.Message) (openflow.Message, error)
	Events() <-chan openflow.Event
	// Read-back (flow, group and meter stats).
	DumpFlows(ctx context.Context, req openflow.FlowStatsRequest) ([]openflow.FlowStats, error)
	GroupStats(ctx context.Context, id uint32) ([]openflow.GroupStats, error)
	MeterStats(ctx context.Context, id uint32) ([]openflow.MeterStats, error)
}

// PortDB is the OVSDB side the agent needs (*ovsdb.Client).
type PortDB interface {
	CreatePort(ctx context.Context, s ovsdb.PortSpec) error
	EnsurePort(ctx context.Context, s ovsdb.PortSpec) (created uint32, err error)
	DeletePort(ctx context.Context, name string) error
	LabelPort(ctx context.Context, name string, set map[string]string) error
	Port(ctx context.Context, name string) (ovsdb.PortInfo, error)
	Ports(ctx context.Context, owner string) ([]ovsdb.PortInfo, error)
	WaitOFPort(ctx context.Context, name string) (uint32, error)
	FlowRestoreWait(ctx context.Context) (bool, error)
	SetFlowRestoreWait(ctx context.Context, on bool) error
}

var (
	_ Switch = (*openflow.Conn)(nil)
	_ PortDB = (*ovsdb.Client)(nil)
)

// Agent is the plugin host.
type Agent struct {
	log *slog.Logger
	sw  Switch
	db  PortDB
	// ns is the node and cluster view (node.go).
	ns nodeState

	// lay orders batches against layout changes. A batch holds it shared
	// from resolving to committing, so the layout it was checked against
	// stays; a layout change (load, unload, sweep, replay) holds it
	// exclusively. The arbiter changes only with lay held exclusively and
	// mu held too, so either one is enough to read it.
	lay sync.RWMutex
	// mu guards the flow store, the keys in flight and the owner locks. It
	// is never held across a switch round trip: batches of different
	// plugins reach the switch side by side (see Apply).
	mu        sync.Mutex
	arb       *pipeline.Arbiter
	store     *flowstore.Store
	inflight  map[pipeline.Key]string
	owners    map[string]*sync.Mutex
	statePath string
	// bornRounds are the rounds each plugin was registered with by this
	// process: the store has seen every flow of them (see Synced). Guarded
	// by mu.
	bornRounds map[string]map[uint16]bool
	// lanes are the connections batches go out on: sw and, against a real
	// switch, batchLanes more. The switch serves each connection in order,
	// so a small batch sent behind a 20,000-flow one on the same connection
	// would wait for all of it; a batch takes the least busy lane instead.
	lanes []*lane

	pmu     sync.Mutex
	cfg     *config.Config
	plugins map[string]*runner
	order   []string

	// evmu orders pod and node events (shared) against admitting a plugin
	// incarnation (exclusive), which replays known to it.
	evmu  sync.RWMutex
	known struct {
		sync.Mutex
		pods  map[string]sdk.PodInterface // by container ID/ifname
		nodes map[string]sdk.NodeInfo     // by name
	}

	// attachments lists the CNI path's records for the CNI plugin's Start
	// (SetAttachments); nil when the agent serves no CNI.
	attachments func() []sdk.PodInterface

	replays   int
	replayMu  sync.Mutex
	eventDone chan struct{}
	// mem returns a sync's garbage to the kernel (memory.go).
	mem *memoryRelease
	// metrics is the Prometheus registry (metrics.go).
	metrics *metrics.Agent
	// traces routes the packet-ins of trace interceptors (inject.go).
	traces traceWaiters
	// gate lets pod requests go ahead of large batches (cnigate.go).
	gate *cniGate
}

// New builds an agent over a connected switch and OVSDB. It only checks
// and allocates; Start loads the persisted layout and does the rest.
//
// When the config sets node.podCIDRs (an explicit override, or a static
// setup without an apiserver) the node facts are known at once; otherwise
// they come from the Node object (JoinCluster).
func New(cfg *config.Config, sw Switch, db PortDB, log *slog.Logger) (*Agent, error) {
	a := &Agent{log: log, sw: sw, db: db, store: flowstore.New(), bornRounds: map[string]map[uint16]bool{}, cfg: cfg,
		inflight: map[pipeline.Key]string{}, owners: map[string]*sync.Mutex{}, lanes: []*lane{{sw: sw}},
		plugins: map[string]*runner{}, statePath: filepath.Join(cfg.RunDir, "state.json"), mem: newMemoryRelease(),
		metrics: metrics.NewAgent(), gate: newCNIGate()}
	a.metrics.Registry.MustRegister(&stateCollector{a: a, scrapeErrs: map[string]float64{}})
	a.known.pods, a.known.nodes = map[string]sdk.PodInterface{}, map[string]sdk.NodeInfo{}
	a.arb = pipeline.New()
	// Called under a.mu, from Plan.
	a.store.KnownRound = func(owner string, round uint16) bool { return a.bornRounds[owner][round] }
	a.ns.facts = BaseFacts(cfg)
	a.ns.overhead = loadOverheads(a.overheadPath(), cfg.Plugins)
	if len(cfg.Node.PodCIDRs) > 0 {
		f, warn, err := kube.Facts(a.ns.facts, kube.Observed{}, cfg.Node, kube.Uplink)
		if err != nil {
			return nil, err
		}
		if warn != "" {
			log.Warn(warn)
		}
		a.ns.facts = a.podMTULocked(f)
		a.ns.known = true
	}
	return a, nil
}

func loadState(path string) (*pipeline.Arbiter, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return pipeline.New(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	var s pipeline.State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s: %w (delete it to start with a fresh layout)", path, err)
	}
	a, err := pipeline.Restore(s)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w (delete it to start with a fresh layout)", path, err)
	}
	return a, nil
}

// saveState persists the layout; the caller holds a.lay exclusively.
func (a *Agent) saveState() {
	b, err := json.MarshalIndent(a.arb.Snapshot(), "", " ")
	if err == nil {
		err = writeFileAtomic(a.statePath, b)
	}
	if err != nil {
		a.log.Error("cannot persist layout; a restarted agent may renumber tables", "path", a.statePath, "error", err)
	}
}

// writeFileAtomic replaces path with b through a temporary file beside it,
// so a crash leaves the old record or the new one, never half of one.
func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Start loads the persisted layout, opens the batch connections, begins
// watching switch events, removes plugins the persisted layout
// knows but the config no longer enables, and starts the configured plugins
// in config order. It returns once every plugin had its first start attempt.
func (a *Agent) Start(ctx context.Context) error {
	if err := a.loadLayout(); err != nil {
		return err
	}
	if err := a.openLanes(ctx); err != nil {
		return err
	}
	if err := a.loadPorts(ctx); err != nil {
		return err
	}
	a.eventDone = make(chan struct{})
	go a.events(ctx)
	if on, err := a.db.FlowRestoreWait(ctx); err == nil && on {
		// Nothing to restore yet: plugins install their flows as they start.
		a.log.Info("flow-restore-wait was set; clearing it once plugins are started")
		defer func() {
			if err := a.db.SetFlowRestoreWait(context.WithoutCancel(ctx), false); err != nil {
				a.log.Error("clear flow-restore-wait", "error", err)
			}
		}()
	}
	a.pmu.Lock()
	cfg := a.cfg
	a.pmu.Unlock()
	enabled := map[string]bool{}
	for _, p := range cfg.Plugins {
		enabled[p.Name] = true
	}
	a.lay.RLock()
	stale := []string{}
	for _, n := range a.arb.PluginNames() {
		if !enabled[n] {
			stale = append(stale, n)
		}
	}
	a.lay.RUnlock()
	for _, n := range stale {
		a.log.Info("plugin in the persisted layout is no longer enabled; removing its flows, ports and tables", "plugin", n)
		a.removePlugin(ctx, n)
	}
	for _, p := range cfg.Plugins {
		a.startPlugin(ctx, p, cfg.EffectiveLimits(p))
	}
	return nil
}

// loadLayout creates the run dir and loads the persisted layout, which
// keeps table IDs and cookie prefixes across a restart of the agent.
func (a *Agent) loadLayout() error {
	if err := os.MkdirAll(a.cfg.RunDir, 0o755); err != nil {
		return fmt.Errorf("run dir: %w", err)
	}
	arb, err := loadState(a.statePath)
	if err != nil {
		return err
	}
	a.lay.Lock()
	a.mu.Lock()
	a.arb = arb
	a.mu.Unlock()
	a.lay.Unlock()
	return nil
}

// loadPorts records the owner of every port already on the bridge (pods
// attached before this agent started, a plugin's tunnel port), so outputs
// to them are checked like those to ports created from now on.
func (a *Agent) loadPorts(ctx context.Context) error {
	ports, err := a.db.Ports(ctx, "")
	if err != nil {
		return fmt.Errorf("list the bridge's ports: %w", err)
	}
	for _, p := range ports {
		if p.OFPort > 0 {
			a.recordPort(uint32(p.OFPort), pipeline.PortGrant{Name: p.Name, Owner: p.Owner, Exported: p.Exported})
		}
	}
	return nil
}

// recordPort and forgetPort keep the arbiter's port book; they take only
// a.mu (to read a.arb), never the layout lock, so a CNI ADD recording its
// pod's port does not wait for another plugin's batch.
func (a *Agent) recordPort(no uint32, g pipeline.PortGrant) {
	if g.Owner == ovsdb.HostOwner {
		g.Owner = "" // the host's own: every plugin may use it
	}
	a.mu.Lock()
	arb := a.arb
	a.mu.Unlock()
	arb.SetPort(no, g)
}

// portGrant says who holds an OpenFlow port number in the port book.
func (a *Agent) portGrant(no uint32) (pipeline.PortGrant, bool) {
	a.mu.Lock()
	arb := a.arb
	a.mu.Unlock()
	return arb.Port(no)
}

func (a *Agent) forgetPort(name string) {
	a.mu.Lock()
	arb := a.arb
	a.mu.Unlock()
	arb.ForgetPort(name)
}

// Stop stops every plugin; flows stay on the switch so traffic keeps
// flowing while the agent is down.
func (a *Agent) Stop() {
	a.pmu.Lock()
	rs := make([]*runner, 0, len(a.plugins))
	for _, n := range a.order {
		rs = append(rs, a.plugins[n])
	}
	a.pmu.Unlock()
	for i := len(rs) - 1; i >= 0; i-- {
		rs[i].stop()
	}
	a.closeLanes()
}

// batchLanes is how many connections, besides the main one, carry batches.
const batchLanes = 2

// lane is one OpenFlow connection batches go out on.
type lane struct {
	sw   Switch
	busy int // batches in flight on it; guarded by Agent.mu
	conn *openflow.Conn
}

// openLanes dials the extra batch connections when the agent drives a
// real switch (a test's fake switch has one lane).
func (a *Agent) openLanes(ctx context.Context) error {
	if _, real := a.sw.(*openflow.Conn); !real || len(a.lanes) > 1 {
		return nil
	}
	for range batchLanes {
		c, err := openflow.Dial(ctx, "unix", a.cfg.MgmtSocket(), switchOptions(a.log, false))
		if err != nil {
			a.closeLanes()
			return fmt.Errorf("batch connection to %s: %w", a.cfg.MgmtSocket(), err)
		}
		a.mu.Lock()
		a.lanes = append(a.lanes, &lane{sw: c, conn: c})
		a.mu.Unlock()
	}
	return nil
}

func (a *Agent) closeLanes() {
	a.mu.Lock()
	ls := a.lanes[1:]
	a.lanes = a.lanes[:1]
	a.mu.Unlock()
	for _, l := range ls {
		l.conn.Close()
	}
}

// lane takes the least busy lane (the main connection on a tie) for one
// batch; done gives it back.
func (a *Agent) lane() (sw Switch, done func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	best := a.lanes[0]
	for _, l := range a.lanes[1:] {
		if l.busy < best.busy {
			best = l
		}
	}
	best.busy++
	return best.sw, func() {
		a.mu.Lock()
		best.busy--
		a.mu.Unlock()
	}
}

// events handles switch events for the agent's lifetime.
func (a *Agent) events(ctx context.Context) {
	defer close(a.eventDone)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-a.sw.Events():
			if !ok {
				return
			}
			switch ev.Kind {
			case openflow.EventConnected:
				a.setOVSConnected(true)
				if ev.Reconnect {
					a.log.Warn("switch connection re-established; replaying all flows", "new_datapath", ev.NewDatapath)
					if err := a.Replay(ctx); err != nil {
						a.log.Error("replay after reconnect failed", "error", err)
					}
				}
			case openflow.EventDisconnected:
				a.setOVSConnected(false)
				a.log.Warn("switch connection lost", "error", ev.Err)
			case openflow.EventPacketIn:
				a.packetIn(ev.PacketIn)
			case openflow.EventFlowRemoved:
				a.flowRemoved(ctx, ev.FlowRemoved)
			}
		}
	}
}

// Replays counts completed replays (for tests and introspection).
func (a *Agent) Replays() int {
	a.replayMu.Lock()
	defer a.replayMu.Unlock()
	return a.replays
}

// Replay re-installs everything the store holds (after ovs-vswitchd lost its
// flows), then clears flow-restore-wait.
func (a *Agent) Replay(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	a.lay.Lock()
	meters, msgs, err := a.allMessages()
	if err == nil {
		err = a.sendMeters(ctx, meters)
	}
	if err == nil {
		err = a.sw.Bundle(ctx, msgs, false)
	}
	a.lay.Unlock()
	if err != nil {
		return fmt.Errorf("replay %d messages: %w", len(msgs), err)
	}
	if on, err := a.db.FlowRestoreWait(ctx); err == nil && on {
		if err := a.db.SetFlowRestoreWait(ctx, false); err != nil {
			return fmt.Errorf("clear flow-restore-wait: %w", err)
		}
	}
	a.replayMu.Lock()
	a.replays++
	a.replayMu.Unlock()
	a.log.Info("replayed flows", "messages", len(msgs))
	return nil
}
