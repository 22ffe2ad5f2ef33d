package agent

import (
	"context"
	"slices"
	"sync"
	"time"

	"switchyard.dev/switchyard/sdk"
)

// Pods first: a plugin's large batch (a policy recompute, a resync of
// 20,000 flows) costs the agent and ovs-vswitchd hundreds of milliseconds
// of CPU, most of it encoding and parsing one flow mod at a time. On a
// small node that CPU is what a CNI ADD running beside it waits for: the
// runtime's process start, the CNI plugin's work, the pod's own small
// bundle. So while any ADD, DEL or CHECK is in flight, a large batch
// pauses between its parts: before it resolves, between the parts it plans,
// while it streams its flow mods to the switch (openflow.WithPacer), and
// before it commits. A commit already on the switch is not interrupted.
//
// Each batch pauses at most yieldBudget in all, so a steady stream of pods
// delays bulk work by a bounded amount and never starves it. A pause may
// happen with the batch's locks held (its owner's, and the layout lock
// shared); a layout change that queues behind it, and a pod batch behind
// that, wait at most what is left of the budget.

// yieldBudget bounds how long one batch pauses for pod requests in all.
const yieldBudget = 250 * time.Millisecond

// gateLinger is how long the gate stays shut after the last pod request
// is answered. Pods come in bursts (a rollout, a drained node's pods
// landing here), and between two requests of a burst the runtime is
// starting the next CNI process, which needs the CPU as much as the
// agent's part does.
const gateLinger = 30 * time.Millisecond

// yieldAbove is the batch size, in operations, from which a batch pauses
// for pod requests: a pod's own batch (about ten flows) never does.
const yieldAbove = lockPart

// cniGate counts the pod requests in flight.
type cniGate struct {
	mu       sync.Mutex
	inflight int
	// clear is closed while no pod request is in flight, and replaced by
	// an open one when the first begins.
	clear chan struct{}
}

func newCNIGate() *cniGate { return &cniGate{clear: closedChan} }

// CNIBegin marks a pod request (ADD, DEL, CHECK) in flight until end is
// called; the CNI server calls it for every one (cniserver.Options.Begin).
func (a *Agent) CNIBegin() (end func()) {
	g := a.gate
	g.mu.Lock()
	if g.clear == closedChan {
		g.clear = make(chan struct{})
	}
	g.inflight++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.inflight--
			if g.inflight > 0 {
				return
			}
			open := g.clear
			time.AfterFunc(gateLinger, func() {
				g.mu.Lock()
				defer g.mu.Unlock()
				if g.inflight == 0 && g.clear == open {
					close(open)
					g.clear = closedChan
				}
			})
		})
	}
}

// closedChan is the gate's clear channel while it is clear.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// yielder is one batch's use of the gate: what is left of its budget.
type yielder struct {
	g      *cniGate
	left   time.Duration
	waited time.Duration
}

// yielder returns the pauser for a batch of n operations of owner; nil
// (never pauses) for a small one, and for the plugin that handles CNI: the
// pod requests it would pause for need its owner lock, which its paused
// batch holds, for their own flows.
func (a *Agent) yielder(owner string, n int) *yielder {
	if n <= yieldAbove || a.handlesCNI(owner) {
		return nil
	}
	return &yielder{g: a.gate, left: yieldBudget}
}

// handlesCNI reports whether owner declared the CNI capability, whether or
// not it runs yet (its resync batches come during its Start).
func (a *Agent) handlesCNI(owner string) bool {
	a.pmu.Lock()
	r := a.plugins[owner]
	a.pmu.Unlock()
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.caps, sdk.CapCNI)
}

// wait returns at once when no pod request is in flight; otherwise when
// none is, when the batch's budget is spent, or when ctx ends.
func (y *yielder) wait(ctx context.Context) {
	if y == nil || y.left <= 0 {
		return
	}
	y.g.mu.Lock()
	clear := y.g.clear
	y.g.mu.Unlock()
	select {
	case <-clear:
		return
	default:
	}
	start := time.Now()
	t := time.NewTimer(y.left)
	select {
	case <-clear:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	took := time.Since(start)
	y.left -= took
	y.waited += took
}
