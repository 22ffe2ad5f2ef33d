package feature

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestStatusWriteBackoff: a status write the apiserver refuses is retried
// after 1 s, then 2 s, 4 s, ... (not at every pass of the loop, which runs
// on every event), and once one succeeds the Egress is written no more
// until its placement changes.
func TestStatusWriteBackoff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	refuse := true
	writes := 0
	dyn.PrependReactor("patch", "egresses", func(k8stesting.Action) (bool, runtime.Object, error) {
		writes++
		if refuse {
			return true, nil, errors.New("egresses.crd.switchyard.dev \"web\" is forbidden")
		}
		return true, nil, nil
	})
	bo := flowcontrol.NewBackOff(statusRetryFirst, statusRetryMax)
	bo.Clock = clk
	e := &Egress{log: slog.New(slog.NewTextHandler(io.Discard, nil)), self: "n1", dyn: dyn, reported: map[string]string{}, statusBackoff: bo}
	plan := Plan{Placements: []Placement{{Egress: "web", IPs: []netip.Addr{netip.MustParseAddr("198.18.0.100")}, Holder: "n1"}}}

	// Each step: how long after the previous one the loop passes, how
	// many passes, and how many writes the apiserver should have seen in
	// all by then.
	for _, step := range []struct {
		what       string
		after      time.Duration
		passes     int
		refuse     bool
		wantWrites int
		wantErr    bool
	}{
		{"first pass writes, refused", 0, 1, true, 1, true},
		{"a burst of events within the first second: no write", 300 * time.Millisecond, 20, true, 1, false},
		{"after 1 s: retried, refused again", time.Second, 1, true, 2, true},
		{"1.5 s later: still backing off (2 s now)", 1500 * time.Millisecond, 5, true, 2, false},
		{"2 s after the retry: retried, accepted", 500 * time.Millisecond, 1, false, 3, false},
		{"written: no more writes for this placement", 10 * time.Second, 10, false, 3, false},
	} {
		clk.Step(step.after)
		refuse = step.refuse
		var err error
		for range step.passes {
			if e := e.report(context.Background(), plan, false); e != nil {
				err = e
			}
		}
		if writes != step.wantWrites {
			t.Errorf("%s: %d writes in all, want %d", step.what, writes, step.wantWrites)
		}
		if (err != nil) != step.wantErr {
			t.Errorf("%s: error %v, want error %v", step.what, err, step.wantErr)
		}
	}
}
