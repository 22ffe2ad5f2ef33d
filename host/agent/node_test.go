package agent

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/sdk"
)

// Readiness names each missing part, and the facts' pod MTU follows the
// largest declared encapsulation overhead.
func TestReadinessAndPodMTU(t *testing.T) {
	a, _, _ := newTestAgent(t)
	a.cfg.Plugins = []config.Plugin{{Name: "podnet"}}
	a.NodeFactsProblem("Node n has no pod CIDR yet")
	a.setOVSConnected(false)
	want := []string{
		"OVS: the OpenFlow connection to the bridge is down (is ovs-vswitchd running?)",
		"node facts: Node n has no pod CIDR yet",
		"plugin podnet: not started yet",
	}
	if diff := cmp.Diff(want, a.NotReady()); diff != "" {
		t.Errorf("NotReady (-want +got):\n%s", diff)
	}
	err := a.WaitReady(context.Background(), 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "not ready after 50ms") || !strings.Contains(err.Error(), "no pod CIDR yet") {
		t.Errorf("WaitReady = %v, want it to name the missing pod CIDR", err)
	}

	a.setOVSConnected(true)
	ctx := context.Background()
	a.SetNodeFacts(ctx, sdk.NodeFacts{Name: "n", MTU: 1500, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}})
	a.setOverhead(ctx, "tunnel", 50)
	a.setOverhead(ctx, "other", 20)
	if f := a.NodeFacts(); f.PodMTU != 1450 || f.MTU != 1500 {
		t.Errorf("facts MTU %d pod MTU %d, want 1500 and 1450", f.MTU, f.PodMTU)
	}
	a.setOverhead(ctx, "tunnel", 0)
	if f := a.NodeFacts(); f.PodMTU != 1480 {
		t.Errorf("pod MTU %d after the tunnel left, want 1480", f.PodMTU)
	}
	if diff := cmp.Diff([]string{"plugin podnet: not started yet"}, a.NotReady()); diff != "" {
		t.Errorf("NotReady with facts known (-want +got):\n%s", diff)
	}
	// A later unusable Node keeps the known facts (and the datapath).
	a.NodeFactsProblem("Node n pod CIDR 10.0.0.0/8 contains the node's own address")
	if f := a.NodeFacts(); f.PodCIDRs[0].String() != "10.0.0.0/24" {
		t.Errorf("facts replaced by a bad update: %v", f.PodCIDRs)
	}
}

// Without an apiserver, node.podCIDRs in the config make the facts known
// at once (a static setup); without them the agent waits.
func TestStaticFactsFromConfig(t *testing.T) {
	a, _, _ := newTestAgent(t)
	if a.ns.known {
		t.Error("facts known without pod CIDRs")
	}
	a.cfg.Node.PodCIDRs = []string{"10.1.0.0/24"}
	b, err := New(a.cfg, a.sw, a.db, a.log)
	if err != nil {
		t.Fatal(err)
	}
	if f := b.NodeFacts(); !b.ns.known || f.PodCIDRs[0].String() != "10.1.0.0/24" || f.MTU != 1500 || f.PodMTU != 1500 {
		t.Errorf("static facts %+v known=%v", f, b.ns.known)
	}
}

// TestOverheadsOutliveTheAgent: a restarted agent knows the overheads its
// plugins declared before, so the pod MTU its first plugins see already
// has the tunnel's share (no gateway MTU flap while the tunnel plugin is
// still to start). A plugin no longer enabled declares nothing.
func TestOverheadsOutliveTheAgent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	facts := sdk.NodeFacts{Name: "n", MTU: 1500, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}
	a1, _, _ := newTestAgentIn(t, dir)
	a1.SetNodeFacts(ctx, facts)
	a1.setOverhead(ctx, "tunnel", 50)
	a1.setOverhead(ctx, "other", 70)

	tests := []struct {
		name    string
		enabled []config.Plugin
		want    int
	}{
		{"both still enabled", []config.Plugin{{Name: "podnet"}, {Name: "tunnel"}, {Name: "other"}}, 1430},
		{"other disabled", []config.Plugin{{Name: "podnet"}, {Name: "tunnel"}}, 1450},
		{"no encapsulating plugin", []config.Plugin{{Name: "podnet"}}, 1500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a2, _, _ := newTestAgentWith(t, dir, tt.enabled)
			a2.SetNodeFacts(ctx, facts) // before any plugin registers
			if got := a2.NodeFacts().PodMTU; got != tt.want {
				t.Errorf("pod MTU after the restart %d, want %d", got, tt.want)
			}
		})
	}
}
