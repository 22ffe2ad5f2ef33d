package ovsrun

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// While the kernel datapath is missing, switchyard-ovs waits: Probe (the
// readiness) says why and what to do, Alive (the liveness) accepts the
// wait; once the datapath answers the record goes and Start may run.
func TestWaitForDatapath(t *testing.T) {
	tests := []struct {
		name     string
		datapath string
		fails    int32 // checks that fail before one succeeds
		stale    bool  // a record left by an earlier container
		checks   int32
	}{
		{name: "netdev never waits", datapath: "netdev", fails: 100, stale: true, checks: 0},
		{name: "system with the module", datapath: "system", checks: 1},
		{name: "system until the module is loaded", datapath: "system", fails: 3, checks: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, unavailableFile)
			if tt.stale {
				if err := os.WriteFile(marker, []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var calls atomic.Int32
			var duringWait []error
			check := func() error {
				n := calls.Add(1)
				if n > 1 { // the record of the previous failed check is there
					duringWait = append(duringWait, Probe(dir), Alive(dir))
				}
				if n <= tt.fails {
					return ErrNoKernelDatapath
				}
				return nil
			}
			o := Options{RunDir: dir, DatapathType: tt.datapath, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if err := WaitForDatapath(context.Background(), o, check, time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if got := calls.Load(); got != tt.checks {
				t.Errorf("%d datapath checks, want %d", got, tt.checks)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the unavailable record is still there after the wait: %v", err)
			}
			for i := 0; i < len(duringWait); i += 2 {
				ready, alive := duringWait[i], duringWait[i+1]
				if ready == nil || !strings.Contains(ready.Error(), "kernel datapath is not available") || !strings.Contains(ready.Error(), "modprobe openvswitch") {
					t.Errorf("readiness while waiting = %v, want the reason and the remedy", ready)
				}
				if alive != nil {
					t.Errorf("liveness while waiting = %v, want alive", alive)
				}
			}
		})
	}
}

// A deleted pod stops waiting.
func TestWaitForDatapathCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	o := Options{RunDir: t.TempDir(), DatapathType: "system", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	err := WaitForDatapath(ctx, o, func() error { return ErrNoKernelDatapath }, time.Millisecond)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("WaitForDatapath = %v, want context.Canceled", err)
	}
}
