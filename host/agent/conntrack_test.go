package agent

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/sdk"
)

// TestFlushConntrack: a plugin flushes entries of its own ct zone (the
// switch gets NXT_CT_FLUSH with the filter); zone 0 and another plugin's
// zone are refused, naming the plugin.
func TestFlushConntrack(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	for _, p := range []string{"a", "b"} {
		if _, err := a.RegisterLocal(ctx, p, &sdk.DescribeResponse{Name: p,
			Resources: []sdk.Resource{{Kind: sdk.ResourceCTZone, Name: p + ".zone"}}}); err != nil {
			t.Fatal(err)
		}
	}
	zone := func(name string) uint16 {
		for _, r := range a.Resources() {
			if r.Name == name {
				return uint16(r.Value)
			}
		}
		t.Fatalf("no resource %s", name)
		return 0
	}
	ep := netip.MustParseAddr("10.244.2.7")
	f := sdk.ConntrackFilter{Zone: zone("a.zone"), Protocol: 17, Reply: sdk.ConntrackTuple{Src: ep, SrcPort: 53}}
	if err := a.FlushConntrack(ctx, "a", f); err != nil {
		t.Fatal(err)
	}
	want := []openflow.Message{&openflow.CTFlush{Zone: f.Zone, Protocol: 17, Reply: openflow.CTTuple{Src: ep, SrcPort: 53}}}
	if d := cmp.Diff(want, sw.requests, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); d != "" {
		t.Errorf("sent (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		name string
		zone uint16
		want error
	}{{"zone 0", 0, sdk.ErrInvalid}, {"another plugin's zone", zone("b.zone"), sdk.ErrUnallocatedField}} {
		err := a.FlushConntrack(ctx, "a", sdk.ConntrackFilter{Zone: tc.zone})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), `plugin "a"`) {
			t.Errorf("%s: got %v, want %v naming the plugin", tc.name, err, tc.want)
		}
	}
	if len(sw.requests) != 1 {
		t.Errorf("a refused flush reached the switch: %v", sw.requests)
	}
}
