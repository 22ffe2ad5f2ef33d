package feature

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
	"switchyard.dev/switchyard/controller/client"
	"switchyard.dev/switchyard/plugins/netpol/flows"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/sdktest"
)

func span() *client.State {
	s := client.NewState()
	a := &apiv1.Member{Namespace: "x", Name: "a", Ips: [][]byte{netip.MustParseAddr("10.244.1.5").AsSlice()}}
	b := &apiv1.Member{Namespace: "y", Name: "b", Ips: [][]byte{netip.MustParseAddr("10.244.2.6").AsSlice()}}
	s.AppliedToGroups[1] = &client.Group{ID: 1, Members: map[client.MemberKey]*apiv1.Member{client.KeyOf(a): a}}
	s.AddressGroups[2] = &client.Group{ID: 2, Members: map[client.MemberKey]*apiv1.Member{client.KeyOf(b): b}}
	s.Policies["p"] = &apiv1.Policy{Uid: "p", SourceKind: flows.SourceKubernetes, Namespace: "x", Name: "p", Generation: 1,
		IsolateIngress: true, AppliedToGroups: []uint32{1},
		Rules: []*apiv1.Rule{{Direction: apiv1.Direction_INGRESS, AddressGroups: []uint32{2}, Ports: []*apiv1.Port{{Protocol: "TCP", Port: 80}}}}}
	s.Epoch, s.Version = "e1", 7
	return s
}

// TestSavedSpanEnforcedWithoutController: a start with the controller
// unreachable (here: not configured) enforces the saved span and reports
// synced, so the host keeps no stale flows and drops none.
func TestSavedSpanEnforcedWithoutController(t *testing.T) {
	dir := t.TempDir()
	if err := span().Save(filepath.Join(dir, "policy.state")); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(Config{StateDir: dir, CountersInterval: "0s"})
	p := sdktest.Start(t, New(), sdktest.Options{Config: cfg, Node: sdk.NodeFacts{Name: "node-1",
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}}})
	if got := p.Host.FlowTexts(flows.IngressIsolation); !slices.ContainsFunc(got, func(s string) bool {
		return s == "table=netpol.ingress_isolation, priority=100, ip,nw_dst=10.244.1.5 actions=drop"
	}) {
		t.Errorf("isolation flows %v do not isolate x/a", got)
	}
	if got := p.Host.FlowTexts(flows.IngressRules); len(got) != 4 {
		t.Errorf("ingress rule flows = %d (%v), want 4 (one peer, one pod, one port, the conjunction)", len(got), got)
	}
	if n := p.Host.SyncedCalls(); n != 1 {
		t.Errorf("Synced called %d times, want 1", n)
	}
}

// TestResyncWithoutChurn: computing the same span again sends nothing; a
// change sends only its difference, in one batch.
func TestResyncWithoutChurn(t *testing.T) {
	h := &countingHost{}
	p := New()
	p.host, p.log, p.installed = h, slog.New(slog.DiscardHandler), map[flow.Key]flow.Flow{}
	p.reports, p.node = make(chan map[string]int64, 1), flows.Node{CTZone: 1}
	ctx := context.Background()
	s := span()
	if err := p.sync(ctx, s, "first"); err != nil {
		t.Fatal(err)
	}
	if h.Batches() != 1 {
		t.Fatalf("first sync: %d batches, want 1", h.Batches())
	}
	if err := p.sync(ctx, span(), "same again"); err != nil {
		t.Fatal(err)
	}
	if h.Batches() != 1 {
		t.Errorf("a resync of the same span sent a batch")
	}
	c := &apiv1.Member{Namespace: "z", Name: "c", Ips: [][]byte{netip.MustParseAddr("10.244.3.7").AsSlice()}}
	s = span()
	s.AddressGroups[2].Members[client.KeyOf(c)] = c
	if err := p.sync(ctx, s, "peer added"); err != nil {
		t.Fatal(err)
	}
	if h.Batches() != 2 {
		t.Fatalf("a change sent %d batches, want 1", h.Batches()-1)
	}
	if got := p.installed; len(got) != len(flows.Compute(s, p.node).Flows) {
		t.Errorf("installed %d flows, computed %d", len(got), len(flows.Compute(s, p.node).Flows))
	}
	// The change moved the epoch, in the same batch, so no cached
	// datapath verdict of the old rules is reachable (flows.Epoch).
	if p.node.Epoch != 1 {
		t.Errorf("epoch after one change = %d, want 1", p.node.Epoch)
	}
	for _, f := range flows.EpochFlows(p.node) {
		got, ok := p.installed[f.Key()]
		if !ok || !flows.SameFlow(&got, &f) {
			t.Errorf("installed conntrack flow %v, want %v", got.String(), f.String())
		}
	}
}

// TestEpochSurvivesRestart: the epoch is saved with the span, so a
// restarted netpol computes the conntrack flows the switch holds.
func TestEpochSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	p := New()
	p.host, p.log, p.installed = &countingHost{}, slog.New(slog.DiscardHandler), map[flow.Key]flow.Flow{}
	p.reports, p.node, p.statePath = make(chan map[string]int64, 1), flows.Node{CTZone: 1}, filepath.Join(dir, "policy.state")
	ctx := context.Background()
	if err := p.sync(ctx, span(), "first"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		p.reports = make(chan map[string]int64, 1)
		s := span()
		s.Policies["p"].Rules[0].Ports[0].Port++
		if err := p.sync(ctx, s, "port changed"); err != nil {
			t.Fatal(err)
		}
		if err := p.sync(ctx, span(), "port back"); err != nil {
			t.Fatal(err)
		}
	}
	if p.node.Epoch != 6 {
		t.Fatalf("epoch after 6 changes = %d, want 6", p.node.Epoch)
	}
	if got := loadEpoch(p.epochPath()); got != 6 {
		t.Errorf("saved epoch %d, want 6", got)
	}
}

// TestBigChangeSplitsBatches: a change larger than a batch may be goes in
// several, additions first.
func TestBigChangeSplitsBatches(t *testing.T) {
	p := New()
	var adds, dels []flow.Flow
	for i := range maxBatchOps + 10 {
		adds = append(adds, flow.Flow{Table: flows.IngressRules, Priority: uint16(i % 60000)})
	}
	dels = append(dels, flow.Flow{Table: flows.EgressRules, Priority: 1})
	bs := p.batches(adds, nil, dels)
	if len(bs) != 2 || bs[0].Len() != maxBatchOps || bs[1].Len() != 11 || bs[1].Ops[10].Kind != flow.OpDelete {
		t.Errorf("batches of %d ops: %d batches", len(adds)+len(dels), len(bs))
	}
}

// countingHost is the sdk.Host seam of sync: it counts batches.
type countingHost struct {
	sdk.Host
	batches []*flow.Batch
}

func (h *countingHost) Apply(_ context.Context, b *flow.Batch) error {
	h.batches = append(h.batches, b)
	return nil
}

func (h *countingHost) Batches() int { return len(h.batches) }
