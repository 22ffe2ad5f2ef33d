package openflow

import (
	"context"
	"testing"
	"time"
)

// TestBundlePacer checks that a pacer runs between parts of a streamed
// bundle, with every message before it already on the switch, and once
// more before the commit; and that the bundle still commits as one.
func TestBundlePacer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flows int
		calls int // between parts, plus one before the commit
	}{
		{"under one part", pacedPart - 1, 1},
		{"exactly one part", pacedPart, 2},
		{"several parts", 3*pacedPart + 10, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeSwitch(t)
			c := dialFake(t, fs, Options{})
			defer c.Close()
			mods := make([]FlowMod, tc.flows)
			for i := range mods {
				mods[i] = FlowMod{Command: FlowAdd, Flow: Flow{Table: 1, Priority: uint16(i)}}
			}
			start := fs.adds.Load()
			var seen []int64
			pace := func(ctx context.Context) {
				// What was written before the pause reaches the switch
				// while we wait: the pacer never holds back a half-flushed
				// part.
				want := int64(min((len(seen)+1)*pacedPart, tc.flows))
				deadline := time.Now().Add(5 * time.Second)
				for fs.adds.Load()-start < want && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				seen = append(seen, fs.adds.Load()-start)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.BundleFlows(WithPacer(ctx, pace), mods, true); err != nil {
				t.Fatalf("BundleFlows: %v", err)
			}
			if len(seen) != tc.calls {
				t.Fatalf("pacer called %d times (%v), want %d", len(seen), seen, tc.calls)
			}
			for i, n := range seen {
				if want := int64(min((i+1)*pacedPart, tc.flows)); n < want {
					t.Errorf("pause %d: the switch had %d of the bundle's messages, want at least %d", i, n, want)
				}
			}
		})
	}
}

// TestBundleWithoutPacer checks that a plain ctx carries no pacer.
func TestBundleWithoutPacer(t *testing.T) {
	if p := pacerFrom(context.Background()); p != nil {
		t.Fatal("a context without WithPacer yields a pacer")
	}
}
