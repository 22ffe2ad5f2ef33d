package agent

import (
	"context"
	"testing"
	"time"
)

func TestCNIGate(t *testing.T) {
	g := newCNIGate()
	if held := g.wait(context.Background(), time.Second); held != 0 {
		t.Fatalf("an idle gate held a batch for %v", held)
	}

	// A call in flight holds a batch until it ends.
	leave := g.enter()
	go func() { time.Sleep(100 * time.Millisecond); leave() }()
	if held := g.wait(context.Background(), 10*time.Second); held < 80*time.Millisecond || held > 5*time.Second {
		t.Errorf("held %v while a call ended after 100ms", held)
	}
	leave() // twice is harmless
	if held := g.wait(context.Background(), time.Second); held != 0 {
		t.Errorf("held %v after the only call ended", held)
	}

	// Two calls: the batch waits for both; never longer than its bound.
	a, b := g.enter(), g.enter()
	a()
	start := time.Now()
	g.wait(context.Background(), 150*time.Millisecond)
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("a batch went on after %v with a call still in flight", took)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if held := g.wait(ctx, 10*time.Second); held > time.Second {
		t.Errorf("a cancelled batch was held %v", held)
	}
	b()
}
