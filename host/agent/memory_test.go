package agent

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestMemoryReleaseFoldsBursts(t *testing.T) {
	var runs atomic.Int32
	done := make(chan struct{}, 10)
	m := &memoryRelease{minInterval: 200 * time.Millisecond, free: func() { runs.Add(1); done <- struct{}{} }}
	m.afterBurst() // runs at once
	<-done
	// Bursts right after a release wait for the interval and fold into one.
	start := time.Now()
	for range 5 {
		m.afterBurst()
	}
	<-done
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("second release ran %v after the first; want it to wait for the interval", waited)
	}
	time.Sleep(300 * time.Millisecond)
	if got := runs.Load(); got != 2 {
		t.Errorf("releases = %d, want 2 (one now, one for the folded bursts)", got)
	}
}
