package ofxlate

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/host/flowstore"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// TestFlowGolden checks the OpenFlow flow each SDK flow becomes, in the
// codec's ovs-ofctl text (which the codec's own tests tie to ovs-ofctl).
func TestFlowGolden(t *testing.T) {
	a := pipeline.New()
	mark := flow.Field{Name: "mark", Width: 8}
	if _, err := a.Register("p", []sdk.Table{
		{Name: "class", Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier},
		{Name: "ct", Pipeline: flow.PipelineIP, Stage: flow.StageConntrackState},
		{Name: "route", Pipeline: flow.PipelineIP, Stage: flow.StageRouting},
		{Name: "out", Pipeline: flow.PipelineIP, Stage: flow.StageOutput},
	}, []flow.Field{mark}, sdk.Resource{Kind: sdk.ResourceCTZone, Name: "p.zone"}); err != nil { // granted zone 1
		t.Fatal(err)
	}
	mac := net.HardwareAddr{0xaa, 0xbb, 0xcc, 0, 0, 1}
	cases := []struct {
		name string
		f    flow.Flow
		want string
	}{
		{"classifier", flow.Flow{Table: "class", Priority: 200, Match: flow.Match{}.InPort(3).EthSrc(mac),
			Actions: []flow.Action{flow.LoadField(flow.FieldPacketSource, 1)}, Goto: flow.GotoPipeline(flow.PipelineIP, flow.StageConntrackState)},
			"cookie=0x1000100000000, priority=200,in_port=3,dl_src=aa:bb:cc:00:00:01 actions=set_field:0x1/0xf->reg0,goto_table:40"},
		{"conntrack", flow.Flow{Table: "ct", Priority: 10, Match: flow.Match{}.IPv4(),
			Actions: []flow.Action{flow.Conntrack(flow.CT{Zone: 1, Resume: flow.NextTable(), NAT: true})}},
			"cookie=0x1000100000000, table=40, priority=10,ip actions=ct(table=90,zone=1,nat)"},
		{"route with field match and rewrite", flow.Flow{Table: "route", Priority: 100, Tag: 9,
			Match:   flow.Match{}.IPv4().IPv4DstPrefix(netip.MustParsePrefix("10.1.0.0/16")).Field(mark, 3).CTState(flow.CTTracked|flow.CTEstablished, flow.CTTracked|flow.CTEstablished|flow.CTNew),
			Actions: []flow.Action{flow.SetEthDst(mac), flow.DecTTL(), flow.LoadField(mark, 7)}, Goto: flow.GotoStage(flow.StageOutput)},
			"cookie=0x1000100000009, table=90, priority=100,ct_state=-new+est+trk,ip,reg0=0x60/0x1fe0,nw_dst=10.1.0.0/16 actions=set_field:aa:bb:cc:00:00:01->eth_dst,dec_ttl,set_field:0xe0/0x1fe0->reg0,goto_table:200"},
		{"output by register", flow.Flow{Table: "out", Priority: 1, Actions: []flow.Action{flow.OutputField(flow.FieldTargetPort)}},
			"cookie=0x1000100000000, table=200, priority=1 actions=output:NXM_NX_REG1[]"},
		{"tcp drop", flow.Flow{Table: "route", Priority: 300, Match: flow.Match{}.TCP().TCPDst(23)},
			"cookie=0x1000100000000, table=90, priority=300,tcp,tp_dst=23 actions=drop"},
		{"conjunction clause", flow.Flow{Table: "route", Priority: 200, Match: flow.Match{}.IPv4().IPv4Src(netip.MustParseAddr("10.0.0.1")),
			Actions: []flow.Action{flow.Conjunction(9, 1, 2)}},
			"cookie=0x1000100000000, table=90, priority=200,ip,nw_src=10.0.0.1 actions=conjunction(9,1/2)"},
		{"conjunction match", flow.Flow{Table: "route", Priority: 200, Match: flow.Match{}.IPv4().ConjID(9), Goto: flow.GotoStage(flow.StageOutput)},
			"cookie=0x1000100000000, table=90, priority=200,conj_id=9,ip actions=goto_table:200"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := a.Resolve("p", &tc.f)
			if err != nil {
				t.Fatal(err)
			}
			of, err := Flow(r)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, of.String()); diff != "" {
				t.Errorf("flow (-want +got):\n%s", diff)
			}
			// The codec must accept it.
			if _, err := openflow.Marshal(1, &openflow.FlowMod{Command: openflow.FlowAdd, Flow: of}); err != nil {
				t.Errorf("encode: %v", err)
			}
		})
	}
}

func TestGroupAndMeter(t *testing.T) {
	g := &flowstore.GroupEntry{Owner: "p", Global: pipeline.GroupID(2, 5), Prefix: 2, Group: &flow.Group{ID: 5, Type: flow.GroupSelect,
		Buckets: []flow.Bucket{{Weight: 10, Actions: []flow.Action{flow.Output(1)}}, {Weight: 20, Actions: []flow.Action{flow.Output(2)}}}}}
	gm, err := GroupMod(flow.OpAdd, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gm.GroupID != 0x02000005 || len(gm.Buckets) != 2 || gm.Buckets[1].Weight != 20 {
		t.Errorf("group mod = %+v", gm)
	}
	if _, err := openflow.Marshal(1, gm); err != nil {
		t.Errorf("encode group: %v", err)
	}
	mm := MeterMod(flow.OpAdd, &flowstore.MeterEntry{Owner: "p", Global: pipeline.MeterID(2, 1), Meter: &flow.Meter{ID: 1, Unit: flow.MeterPktps, Bands: []flow.MeterBand{{Rate: 100, Burst: 10}}}})
	want := &openflow.MeterMod{Command: openflow.MeterAdd, Flags: openflow.MeterPktps | openflow.MeterBurst, MeterID: 2<<10 | 1, Bands: []openflow.MeterBand{{Type: 1, Rate: 100, BurstSize: 10}}}
	if diff := cmp.Diff(want, mm); diff != "" {
		t.Errorf("meter mod (-want +got):\n%s", diff)
	}
}
