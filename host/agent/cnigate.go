package agent

import (
	"context"
	"sync"
	"time"
)

// Pod start-up comes first. While ovs-vswitchd commits a bundle its main
// thread does nothing else, so a CNI ADD that meets a neighbour's
// 20,000-flow bundle waits for it twice: to get its port's number, then to
// commit its own few flows. The host cannot make the switch's commit any
// shorter, but it can choose when to start one: a large bundle, once the
// switch holds all of it, is committed only when no CNI call is in flight
// (or after largeBatchHold), so an ADD meets at most a commit that had
// already begun.
const (
	// largeBatch is the switch message count from which a batch waits for
	// CNI calls; a pod's own batch is a handful of flows.
	largeBatch = 512
	// largeBatchHold bounds the wait, so a steady stream of pods delays a
	// policy by at most this much per batch and never starves it.
	largeBatchHold = 500 * time.Millisecond
)

// cniGate counts the CNI calls in flight.
type cniGate struct {
	mu sync.Mutex
	n  int
	// idle is closed when n is 0; a new one replaces it when n leaves 0.
	idle chan struct{}
}

func newCNIGate() *cniGate {
	g := &cniGate{idle: make(chan struct{})}
	close(g.idle)
	return g
}

// enter marks a CNI call in flight until the returned func is called.
func (g *cniGate) enter() (leave func()) {
	g.mu.Lock()
	if g.n == 0 {
		g.idle = make(chan struct{})
	}
	g.n++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.n--
			if g.n == 0 {
				close(g.idle)
			}
			g.mu.Unlock()
		})
	}
}

// wait returns once no CNI call is in flight, max has passed or ctx ended,
// and says how long it waited.
func (g *cniGate) wait(ctx context.Context, max time.Duration) time.Duration {
	g.mu.Lock()
	idle := g.idle
	g.mu.Unlock()
	select {
	case <-idle:
		return 0
	default:
	}
	start := time.Now()
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
	return time.Since(start)
}

// holdLarge is owner's commit gate (openflow.WithCommitGate): a large
// bundle waits for the CNI calls in flight.
func (a *Agent) holdLarge(owner string) func(context.Context, int) {
	return func(ctx context.Context, n int) {
		if n < largeBatch {
			return
		}
		if held := a.gate.wait(ctx, largeBatchHold); held > 0 {
			a.log.Debug("large bundle's commit held while CNI calls were in flight", "plugin", owner, "messages", n, "held", held)
		}
	}
}

// CNICallStarted marks a CNI call (ADD, DEL) in flight until the returned
// func is called: meanwhile large batches wait (cniGate). The CNI server
// calls it around each call into the CNI plugin.
func (a *Agent) CNICallStarted() (done func()) { return a.gate.enter() }
