package agent

import (
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	b := newBucket(10, 3)
	got := 0
	for range 10 {
		if b.allow() {
			got++
		}
	}
	if got != 3 {
		t.Errorf("burst of 3: %d of 10 immediate calls allowed", got)
	}
	// Refill is computed from elapsed time; move the clock instead of sleeping.
	b.mu.Lock()
	b.last = b.last.Add(-200 * time.Millisecond) // 2 tokens at 10/s
	b.mu.Unlock()
	got = 0
	for range 10 {
		if b.allow() {
			got++
		}
	}
	if got != 2 {
		t.Errorf("after 200ms at 10/s: %d allowed, want 2", got)
	}
	var unlimited *bucket
	if !unlimited.allow() || !newBucket(0, 0).allow() {
		t.Errorf("a nil or zero-rate bucket must not limit")
	}
}

func TestTunnelsOffloads(t *testing.T) {
	for v, want := range map[string]bool{"3.1.0": false, "3.2.9": false, "3.3.0": true, "3.5.1": true, "4.0.0": true, "": false, "x.y": false, "2.17.9": false} {
		if got := TunnelsOffloads(v); got != want {
			t.Errorf("TunnelsOffloads(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestRevalidatesOverlapsRight(t *testing.T) {
	for v, want := range map[string]bool{
		"3.1.0": false, "3.1.2": false, "3.1.3": true, "3.1.0-2+deb12u1": false, "3.1.5-1": true,
		"2.17.9": false, "2.17.10": true, "3.0.4": false, "3.0.5": true, "3.2.0": true, "3.5.0": true, "4.0": true,
		"2.16.3": false, "": false, "x.y": false,
	} {
		if got := RevalidatesOverlapsRight(v); got != want {
			t.Errorf("RevalidatesOverlapsRight(%q) = %v, want %v", v, got, want)
		}
	}
}
