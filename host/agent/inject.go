package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/host/traceflow"
	"switchyard.dev/switchyard/sdk"
)

// Datapath confirmation of a trace. The trace itself is computed from the
// switch's flows (trace.go); with TraceRequest.Inject the agent then sends
// a real packet, marked with a pkt_mark bit no plugin holds (traceMark;
// none can be granted it meanwhile), into table 0 as if it came from the source
// pod's port. Just above each flow where the computed trace ends (the
// output, the drop, the send-to-controller) the host installs for the
// moment a copy matching the mark that sends the packet to the agent
// instead. The packet thus crosses the real tables and comes back from the
// flow the trace predicted, and never reaches a pod, a tunnel or a plugin.
//
// The interceptors carry a cookie no plugin can have (traceCookiePrefix)
// and a hard timeout, so they vanish even if the agent dies mid-trace, and
// layout changes (sweeps delete unknown flows) wait while they are in.

const (
	traceCookiePrefix uint16 = 0xfffe
	// traceWait bounds how long the agent waits for the injected packet;
	// traceFirstWait the wait before it sends it again (traceAttempts).
	traceWait      = 2 * time.Second
	traceFirstWait = 500 * time.Millisecond
	traceAttempts  = 2
	// interceptorTimeout is the interceptors' hard timeout (seconds).
	interceptorTimeout = 10
)

// DatapathCheck is what the injected packet showed.
type DatapathCheck struct {
	Injected bool `json:"injected"`
	// Attempts is how many times the packet was sent (see inject).
	Attempts int `json:"attempts,omitempty"`
	// Confirmed: the packet came back from every flow where the computed
	// trace ends, and from nowhere else.
	Confirmed bool `json:"confirmed"`
	// Reached lists the tables the packet came back from.
	Reached []string `json:"reached,omitempty"`
	Message string   `json:"message,omitempty"`
}

// traceWaiters routes trace packet-ins by cookie.
type traceWaiters struct {
	mu   sync.Mutex
	next atomic.Uint32
	by   map[uint64]chan *openflow.PacketIn
}

func (w *traceWaiters) add(cookie uint64) chan *openflow.PacketIn {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.by == nil {
		w.by = map[uint64]chan *openflow.PacketIn{}
	}
	ch := make(chan *openflow.PacketIn, 16)
	w.by[cookie] = ch
	return ch
}

func (w *traceWaiters) remove(cookie uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.by, cookie)
}

// deliver takes a packet-in that a trace interceptor sent; it reports
// whether it was one (those never reach plugins).
func (w *traceWaiters) deliver(pi *openflow.PacketIn) bool {
	if prefix, _, _ := pipeline.SplitCookie(pi.Cookie); prefix != traceCookiePrefix {
		return false
	}
	w.mu.Lock()
	ch := w.by[pi.Cookie]
	w.mu.Unlock()
	if ch != nil {
		select {
		case ch <- pi:
		default:
		}
	}
	return true
}

// terminal is a flow where the computed trace ends.
type terminal struct {
	table    uint8
	priority uint16
	match    openflow.Match
	miss     bool
}

// inject sends the marked packet and waits for it at the terminals of res.
// tunnel sets the tunnel metadata of a packet that arrives from another
// node (nil otherwise).
func (a *Agent) inject(ctx context.Context, res *traceflow.Result, pkt *traceflow.Packet, hops []TraceHop) *DatapathCheck {
	dc := &DatapathCheck{}
	frame, err := pkt.Frame([]byte("switchyard trace"))
	if err != nil {
		dc.Message = "not injected: " + err.Error()
		return dc
	}
	var terms []terminal
	seen := map[string]bool{}
	addTerm := func(i int) {
		h := res.Hops[i]
		key := fmt.Sprintf("%d/%d/%s", h.Table, h.Priority, h.Match)
		if seen[key] {
			return
		}
		seen[key] = true
		terms = append(terms, terminal{table: h.Table, priority: h.Priority, match: h.Match, miss: h.End == "miss"})
	}
	for _, o := range res.Outputs {
		addTerm(o.Hop)
	}
	for _, i := range res.Drops {
		addTerm(i)
	}
	for _, i := range res.Controller {
		addTerm(i)
	}
	if len(terms) == 0 {
		dc.Message = "not injected: the trace ends nowhere to intercept"
		return dc
	}
	// No layout change while the interceptors are in: a sweep would delete
	// them as unknown flows, and a plugin registering could be granted the
	// trace mark.
	a.lay.RLock()
	defer a.lay.RUnlock()
	mark, ok := a.traceMark()
	if !ok {
		dc.Message = "not injected: every pkt_mark bit is granted to a plugin; none is left to mark the trace packet"
		return dc
	}
	cookie := pipeline.Cookie(traceCookiePrefix, 0, a.traces.next.Add(1))
	var msgs []openflow.Message
	for _, t := range terms {
		m, ok := markedMatch(t.match, mark)
		if !ok {
			dc.Message = fmt.Sprintf("not injected: the flow in table %d matches the trace mark itself", t.table)
			return dc
		}
		prio := t.priority + 1
		if t.miss {
			prio = 0
		} else if t.priority == 0xffff {
			dc.Message = fmt.Sprintf("not injected: the flow in table %d has the highest priority; nothing can stand above it", t.table)
			return dc
		}
		fm := openflow.AddFlow(openflow.Flow{Table: t.table, Priority: prio, Cookie: cookie, HardTimeout: interceptorTimeout, Match: m,
			Instructions: []openflow.Instruction{openflow.Apply(openflow.Controller{Reason: openflow.ReasonAction, Userdata: []byte("switchyard-trace")})}})
		msgs = append(msgs, &fm)
	}
	ch := a.traces.add(cookie)
	defer a.traces.remove(cookie)
	if err := a.sw.Bundle(ctx, msgs, true); err != nil {
		dc.Message = "not injected: installing the interceptors: " + err.Error()
		return dc
	}
	defer func() {
		del := openflow.DeleteCookie(cookie, ^uint64(0))
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.sw.Bundle(dctx, []openflow.Message{&del}, true); err != nil {
			a.log.Warn("removing trace interceptors (their hard timeout will)", "cookie", fmt.Sprintf("%#x", cookie), "error", err)
		}
	}()
	acts := []openflow.Action{openflow.Set(openflow.Masked(openflow.FieldPktMark, mark, mark))}
	for _, f := range []openflow.Field{openflow.FieldTunIPv4Src, openflow.FieldTunIPv4Dst, openflow.FieldTunID} {
		if v := pkt.Uint(f); v != 0 {
			acts = append(acts, openflow.Set(openflow.Exact(f, v)))
		}
	}
	acts = append(acts, openflow.Output{Port: openflow.PortTable})
	name := map[uint8]string{}
	for _, h := range hops {
		name[h.TableID] = h.Table
	}
	// A packet-out that recirculates (ct(table=N)) and meets a flow the
	// datapath has not cached yet is sometimes lost by ovs-vswitchd 3.1's
	// userspace datapath: the first of a new 5-tuple through netpol's
	// conntrack does not come back, the same packet sent again does. So a
	// packet that has not come back in traceFirstWait is sent once more.
	reached := map[uint8]bool{}
	for attempt := 1; attempt <= traceAttempts && len(reached) == 0; attempt++ {
		if err := a.sw.Send(ctx, &openflow.PacketOut{InPort: uint32(pkt.Uint(openflow.FieldInPort)), Actions: acts, Data: frame}); err != nil {
			dc.Message = "not injected: packet-out: " + err.Error()
			return dc
		}
		dc.Injected, dc.Attempts = true, attempt
		wait := traceWait
		if attempt < traceAttempts {
			wait = traceFirstWait
		}
		timer := time.NewTimer(wait)
	wait:
		for len(reached) < len(terms) {
			select {
			case pi := <-ch:
				reached[pi.Table] = true
			case <-timer.C:
				break wait
			case <-ctx.Done():
				break wait
			}
		}
		timer.Stop()
	}
	want := map[uint8]bool{}
	for _, t := range terms {
		want[t.table] = true
	}
	for _, t := range slices.Sorted(func(yield func(uint8) bool) {
		for t := range reached {
			if !yield(t) {
				return
			}
		}
	}) {
		dc.Reached = append(dc.Reached, fmt.Sprintf("%s(%d)", name[t], t))
	}
	dc.Confirmed = len(reached) == len(want)
	for t := range want {
		dc.Confirmed = dc.Confirmed && reached[t]
	}
	switch {
	case dc.Confirmed:
		dc.Message = "the injected packet came back from the flow(s) where the trace ends, and was stopped there"
	case len(reached) == 0:
		dc.Message = fmt.Sprintf("the injected packet did not come back within %v: the datapath did not take the computed path (conntrack state, a select group's bucket, or flows changed meanwhile)", traceWait)
	default:
		dc.Message = "the injected packet came back from other tables than the trace predicted"
	}
	return dc
}

// traceMark is a pkt_mark bit no plugin holds (the highest free one): no
// plugin flow sets or matches it, and none can be granted it while the
// caller holds a.lay. False if every bit is granted.
func (a *Agent) traceMark() (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var used uint64
	for _, g := range a.arb.Grants() {
		if g.Kind == sdk.ResourcePktMark {
			used |= g.Mask128().Lo
		}
	}
	for bit := 31; bit >= 0; bit-- {
		if used&(1<<bit) == 0 {
			return 1 << bit, true
		}
	}
	return 0, false
}

// markedMatch adds the trace mark to a flow's match; false if the match
// already constrains that bit.
func markedMatch(m openflow.Match, mark uint64) (openflow.Match, bool) {
	out := make(openflow.Match, 0, len(m)+1)
	found := false
	for _, f := range m {
		if f.Field == openflow.FieldPktMark {
			if f.MaskUint64()&mark != 0 {
				return nil, false
			}
			f = openflow.Masked(openflow.FieldPktMark, f.Uint64()|mark, f.MaskUint64()|mark)
			found = true
		}
		out = append(out, f)
	}
	if !found {
		out = append(out, openflow.Masked(openflow.FieldPktMark, mark, mark))
	}
	return out, true
}
