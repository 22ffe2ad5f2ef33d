package agent

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// waitDone runs y.wait in the background and returns a channel closed
// when it returns.
func waitDone(ctx context.Context, y *yielder) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		y.wait(ctx)
		close(done)
	}()
	return done
}

func returned(done <-chan struct{}, within time.Duration) bool {
	select {
	case <-done:
		return true
	case <-time.After(within):
		return false
	}
}

// TestCNIGate checks when a large batch pauses for pod requests.
func TestCNIGate(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, a *Agent)
	}{
		{"a small batch never pauses", func(t *testing.T, a *Agent) {
			end := a.CNIBegin()
			defer end()
			if y := a.yielder("beta", yieldAbove); y != nil {
				t.Fatalf("a batch of %d operations got a yielder", yieldAbove)
			}
			var y *yielder
			if !returned(waitDone(context.Background(), y), time.Second) {
				t.Fatal("a nil yielder waited")
			}
		}},
		{"the CNI plugin's batch never pauses", func(t *testing.T, a *Agent) {
			// Its paused batch would hold the owner lock the ADD's own
			// flows need.
			a.plugins = map[string]*runner{"podnet": {caps: []sdk.Capability{sdk.CapPodInterface, sdk.CapCNI}}}
			if y := a.yielder("podnet", 20000); y != nil {
				t.Fatal("the CNI plugin's large batch got a yielder")
			}
			if y := a.yielder("beta", 20000); y == nil {
				t.Fatal("another plugin's large batch got no yielder")
			}
		}},
		{"no pod request: no pause", func(t *testing.T, a *Agent) {
			y := a.yielder("beta", yieldAbove+1)
			if !returned(waitDone(context.Background(), y), time.Second) {
				t.Fatal("waited with no pod request in flight")
			}
			if y.waited != 0 {
				t.Fatalf("waited %v with no pod request in flight", y.waited)
			}
		}},
		{"pauses until the last request ends, and a linger after", func(t *testing.T, a *Agent) {
			end1, end2 := a.CNIBegin(), a.CNIBegin()
			y := a.yielder("beta", yieldAbove+1)
			done := waitDone(context.Background(), y)
			end1()
			end1() // ending twice counts once
			if returned(done, 50*time.Millisecond) {
				t.Fatal("the batch went on while a pod request was still in flight")
			}
			ended := time.Now()
			end2()
			if !returned(done, 5*time.Second) {
				t.Fatal("the batch did not go on after the last pod request ended")
			}
			if since := time.Since(ended); since < gateLinger {
				t.Errorf("the batch went on %v after the last request, before the %v linger", since, gateLinger)
			}
		}},
		{"a request during the linger keeps the gate shut", func(t *testing.T, a *Agent) {
			a.CNIBegin()()
			end := a.CNIBegin()
			y := a.yielder("beta", yieldAbove+1)
			done := waitDone(context.Background(), y)
			if returned(done, 2*gateLinger) {
				t.Fatal("the first request's linger opened the gate under the second request")
			}
			end()
			if !returned(done, 5*time.Second) {
				t.Fatal("the batch did not go on")
			}
		}},
		{"the budget bounds the pauses of one batch", func(t *testing.T, a *Agent) {
			end := a.CNIBegin()
			defer end()
			y := &yielder{g: a.gate, left: 30 * time.Millisecond}
			if !returned(waitDone(context.Background(), y), 5*time.Second) {
				t.Fatal("the batch waited past its budget")
			}
			if y.left > 0 {
				t.Fatalf("budget left %v after waiting it out", y.left)
			}
			// Spent: later parts do not pause at all.
			if !returned(waitDone(context.Background(), y), 10*time.Millisecond) {
				t.Fatal("a batch with its budget spent paused again")
			}
		}},
		{"a cancelled batch stops waiting", func(t *testing.T, a *Agent) {
			end := a.CNIBegin()
			defer end()
			ctx, cancel := context.WithCancel(context.Background())
			y := a.yielder("beta", yieldAbove+1)
			done := waitDone(ctx, y)
			cancel()
			if !returned(done, 5*time.Second) {
				t.Fatal("the batch kept waiting after its context ended")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, &Agent{gate: newCNIGate()})
		})
	}
}

// TestLargeBatchYieldsToPods checks the wiring in Apply: a plugin's large
// batch waits for a pod request in flight, a small one does not.
func TestLargeBatchYieldsToPods(t *testing.T) {
	cfg := &config.Config{NodeName: "n", Bridge: config.Bridge{Name: "br-int", DatapathType: "netdev"}, RunDir: t.TempDir(), Node: config.Node{MTU: 1500}}
	a, err := New(cfg, discardSwitch{}, &fakeDB{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	desc := &sdk.DescribeResponse{Name: "beta", Tables: []sdk.Table{{Name: "beta.ingress", Pipeline: flow.PipelineIP, Stage: flow.StageIngressSecurity, Miss: sdk.MissNext}}}
	if _, err := a.RegisterLocal(ctx, "beta", desc); err != nil {
		t.Fatal(err)
	}
	batch := func(n, port int) *flow.Batch {
		b := flow.NewBatch()
		for i := range n {
			dst := netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)})
			b.AddFlows(flow.Flow{Table: "beta.ingress", Priority: 10, Match: flow.Match{}.IPv4().IPv4Dst(dst), Actions: []flow.Action{flow.Output(uint32(port))}})
		}
		return b
	}
	apply := func(b *flow.Batch) <-chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := a.Apply(ctx, "beta", b, config.Limits{}); err != nil {
				t.Errorf("Apply: %v", err)
			}
		}()
		return done
	}
	end := a.CNIBegin()
	if !returned(apply(batch(yieldAbove, 1)), 5*time.Second) {
		t.Fatal("a small batch waited for a pod request")
	}
	big := apply(batch(4*yieldAbove, 2))
	if returned(big, 50*time.Millisecond) {
		end()
		t.Fatal("a large batch did not wait for the pod request in flight")
	}
	end()
	if !returned(big, 5*time.Second) {
		t.Fatal("the large batch did not go on once the pod request ended")
	}
}
