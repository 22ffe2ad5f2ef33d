package host

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// TestGroupsMetersAndRefusals drives an in-process agent against a real
// switch with the whole flow model: groups, meters, conntrack, registers,
// and a batch the switch itself refuses (which must leave nothing behind).
func TestGroupsMetersAndRefusals(t *testing.T) {
	n := newNode(t)
	a, cfg := newInProcessAgent(t, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	mark := flow.Field{Name: "mark", Width: 8}
	asg, err := a.RegisterLocal(ctx, "local", &sdk.DescribeResponse{Name: "local", Fields: []flow.Field{mark},
		Resources: []sdk.Resource{{Kind: sdk.ResourceCTZone, Name: "local.zone"}}, Tables: []sdk.Table{
			{Name: "l.class", Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier},
			{Name: "l.ct", Pipeline: flow.PipelineIP, Stage: flow.StageConntrackState},
			{Name: "l.out", Pipeline: flow.PipelineIP, Stage: flow.StageOutput},
		}})
	if err != nil {
		t.Fatal(err)
	}
	zone := uint16(asg.Grants["local.zone"].Value) // the first zone granted: 1
	lim := cfg.Limits
	b := flow.NewBatch().
		AddMeter(flow.Meter{ID: 1, Unit: flow.MeterPktps, Bands: []flow.MeterBand{{Rate: 1000, Burst: 100}}}).
		AddGroup(flow.Group{ID: 5, Type: flow.GroupSelect, Buckets: []flow.Bucket{
			{Weight: 10, Actions: []flow.Action{flow.Output(10)}}, {Weight: 20, Actions: []flow.Action{flow.Output(11)}}}}).
		AddFlows(
			flow.Flow{Table: "l.class", Priority: 10, Match: flow.Match{}.IPv4().IPv4Dst(netip.MustParseAddr("10.0.0.9")),
				Actions: []flow.Action{flow.ApplyMeter(1), flow.LoadField(mark, 3)}, Goto: flow.GotoPipeline(flow.PipelineIP, flow.StageConntrackState)},
			flow.Flow{Table: "l.ct", Priority: 10, Match: flow.Match{}.IPv4().Field(mark, 3),
				Actions: []flow.Action{flow.Conntrack(flow.CT{Zone: zone, Resume: flow.NextTable()})}},
			flow.Flow{Table: "l.out", Priority: 10, Match: flow.Match{}.IPv4().CTState(flow.CTTracked|flow.CTNew, flow.CTTracked|flow.CTNew),
				Actions: []flow.Action{flow.Conntrack(flow.CT{Commit: true, Zone: zone}), flow.ApplyGroup(5)}},
		)
	if err := a.Apply(ctx, "local", b, lim); err != nil {
		t.Fatal(err)
	}
	groups := n.sw.Ofctl(t, "dump-groups", "br-int")
	if !strings.Contains(groups, "group_id=16777221,type=select") || !strings.Contains(groups, "weight:20,actions=output:11") {
		t.Errorf("group 5 of prefix 1 (16777221) not on the switch:\n%s", groups)
	}
	if meters := n.sw.Ofctl(t, "dump-meters", "br-int"); !strings.Contains(meters, "meter=1025 pktps burst") || !strings.Contains(meters, "rate=1000") {
		t.Errorf("meter 1 of prefix 1 (1025) not on the switch:\n%s", meters)
	}
	flows := n.sw.Ofctl(t, "--no-stats", "dump-flows", "br-int")
	for _, want := range []string{
		"priority=10,ip,nw_dst=10.0.0.9 actions=meter:1025,set_field:0x60/0x1fe0->reg0,goto_table:40",
		"table=40, priority=10,ip,reg0=0x60/0x1fe0 actions=ct(table=200,zone=1)",
		"table=200, priority=10,ct_state=+new+trk,ip actions=ct(commit,zone=1),group:16777221",
	} {
		if !strings.Contains(flows, want) {
			t.Errorf("switch lacks %q:\n%s", want, flows)
		}
	}

	// A conjunctive match through the SDK: two clauses (source, port) and the
	// conj_id flow that acts once both matched.
	conj := flow.NewBatch().AddFlows(
		flow.Flow{Table: "l.out", Priority: 50, Match: flow.Match{}.IPv4().IPv4Src(netip.MustParseAddr("10.0.0.1")), Actions: []flow.Action{flow.Conjunction(7, 1, 2)}},
		flow.Flow{Table: "l.out", Priority: 50, Match: flow.Match{}.IPv4().IPv4Src(netip.MustParseAddr("10.0.0.2")), Actions: []flow.Action{flow.Conjunction(7, 1, 2)}},
		flow.Flow{Table: "l.out", Priority: 50, Match: flow.Match{}.TCP4().TCPDst(80), Actions: []flow.Action{flow.Conjunction(7, 2, 2)}},
		flow.Flow{Table: "l.out", Priority: 50, Match: flow.Match{}.IPv4().ConjID(7), Actions: []flow.Action{flow.Output(10)}},
	)
	if err := a.Apply(ctx, "local", conj, lim); err != nil {
		t.Fatalf("conjunction batch: %v", err)
	}
	flows = n.sw.Ofctl(t, "--no-stats", "dump-flows", "br-int")
	for _, want := range []string{
		"table=200, priority=50,ip,nw_src=10.0.0.1 actions=conjunction(7,1/2)",
		"table=200, priority=50,ip,nw_src=10.0.0.2 actions=conjunction(7,1/2)",
		"table=200, priority=50,tcp,tp_dst=80 actions=conjunction(7,2/2)",
		"table=200, priority=50,conj_id=7,ip actions=output:10",
	} {
		if !strings.Contains(flows, want) {
			t.Errorf("switch lacks %q:\n%s", want, flows)
		}
	}

	before := n.sw.Ofctl(t, "--no-stats", "dump-flows", "br-int")
	// The arbiter cannot know that a group is missing; the switch refuses the
	// bundle, and nothing of the batch may remain.
	bad := flow.NewBatch().AddFlows(
		flow.Flow{Table: "l.out", Priority: 20, Match: flow.Match{}.InPort(3), Actions: []flow.Action{flow.Output(4)}},
		flow.Flow{Table: "l.out", Priority: 21, Match: flow.Match{}.InPort(4), Actions: []flow.Action{flow.ApplyGroup(99)}},
	)
	if err := a.Apply(ctx, "local", bad, lim); !errors.Is(err, sdk.ErrSwitch) {
		t.Fatalf("batch using a missing group: err = %v, want ErrSwitch", err)
	}
	if after := n.sw.Ofctl(t, "--no-stats", "dump-flows", "br-int"); after != before {
		t.Errorf("a refused batch changed the switch:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	for _, f := range a.Flows("local") {
		if strings.Contains(f, "in_port=3") {
			t.Errorf("refused flow kept in the store: %s", f)
		}
	}

	if err := a.Apply(ctx, "local", flow.NewBatch().DeleteFlows(flow.Flow{Table: "l.out", Priority: 10,
		Match: flow.Match{}.IPv4().CTState(flow.CTTracked|flow.CTNew, flow.CTTracked|flow.CTNew)}).DeleteGroup(5).DeleteMeter(1), lim); err != nil {
		t.Fatal(err)
	}
	if groups := n.sw.Ofctl(t, "dump-groups", "br-int"); strings.Contains(groups, "group_id=16777221") {
		t.Errorf("group still there after delete:\n%s", groups)
	}
}
