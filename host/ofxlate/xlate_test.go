package ofxlate

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/host/flowstore"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/flow/flowtest"
)

// vocabArbiter declares a plugin with every flowtest field and a later
// table "next" (for resubmit, ct(table=) and learn samples).
func vocabArbiter(t testing.TB) *pipeline.Arbiter {
	a := pipeline.New()
	if _, err := a.Register("p", []sdk.Table{
		{Name: "class", Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier},
		{Name: "next", Pipeline: flow.PipelineIP, Stage: flow.StageRouting},
	}, flowtest.Fields(), flowtest.Resources()...); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestEveryActionTranslates: every action type (flowtest.Actions, which
// its own test keeps complete) resolves, translates, encodes, and the
// host's resolved text equals the codec's ovs-ofctl text.
func TestEveryActionTranslates(t *testing.T) {
	a := vocabArbiter(t)
	for _, s := range flowtest.Actions("next") {
		t.Run(s.Name, func(t *testing.T) {
			f := &flow.Flow{Table: "class", Priority: 5, Actions: []flow.Action{s.Action}}
			r, err := a.Resolve("p", f)
			if err != nil {
				t.Fatal(err)
			}
			of, err := Flow(r)
			if err != nil {
				t.Fatalf("translate: %v", err)
			}
			if _, err := openflow.Marshal(1, &openflow.FlowMod{Command: openflow.FlowAdd, Flow: of}); err != nil {
				t.Fatalf("encode: %v", err)
			}
			ours, codec := r.String(), of.String()
			if ours != codec {
				t.Errorf("resolved text %q, but the switch prints %q", ours, codec)
			}
		})
	}
}

// TestEveryMatchTranslates: every match kind translates and encodes, and
// the host's resolved text of the flow is exactly the codec's (ovs-ofctl's)
// text, field order included.
func TestEveryMatchTranslates(t *testing.T) {
	a := vocabArbiter(t)
	for _, s := range flowtest.Matches() {
		t.Run(s.Name, func(t *testing.T) {
			r, err := a.Resolve("p", &flow.Flow{Table: "class", Priority: 5, Match: s.Match})
			if err != nil {
				t.Fatal(err)
			}
			of, err := Flow(r)
			if err != nil {
				t.Fatalf("translate: %v", err)
			}
			if _, err := openflow.Marshal(1, &openflow.FlowMod{Command: openflow.FlowAdd, Flow: of}); err != nil {
				t.Fatalf("encode: %v", err)
			}
			if got, want := r.String(), of.String(); got != want {
				t.Errorf("resolved text differs from the switch's (ovs-ofctl):\n ours   %s\n switch %s", got, want)
			}
		})
	}
}

// TestBucketResubmitAndSelection: a select group hashing on chosen
// fields, whose bucket continues the pipeline with a resubmit to a table
// the plugin may write; a private table of another plugin is refused.
func TestBucketResubmitAndSelection(t *testing.T) {
	a := vocabArbiter(t)
	if _, err := a.Register("q", []sdk.Table{{Name: "q.private", Pipeline: flow.PipelineIP, Stage: flow.StageOutput}}, nil); err != nil {
		t.Fatal(err)
	}
	p, _ := a.Plugin("p")
	ctx := func(owner string) *Context {
		return &Context{Table: func(j flow.Jump) (uint8, error) { return a.WritableTable(owner, j) }}
	}
	g := &flowstore.GroupEntry{Owner: "p", Global: pipeline.GroupID(p.Prefix, 1), Prefix: p.Prefix, Group: &flow.Group{ID: 1, Type: flow.GroupSelect,
		Selection: &flow.Selection{Method: flow.SelectHash, Fields: []flow.MatchKind{flow.MatchTCPSrc, flow.MatchIPv4Src}},
		Buckets:   []flow.Bucket{{Weight: 10, Actions: []flow.Action{flow.Resubmit(flow.GotoTable("next"))}}, {Weight: 20, Actions: []flow.Action{flow.Output(2)}}}}}
	gm, err := GroupMod(flow.OpAdd, g, ctx("p"))
	if err != nil {
		t.Fatal(err)
	}
	desc := openflow.GroupDesc{Type: gm.Type, GroupID: gm.GroupID, Buckets: gm.Buckets, Selection: gm.Selection}
	if got, want := desc.String(), "group_id=16777217,type=select,selection_method=hash,fields(ip_src,tcp_src),bucket=bucket_id:0,weight:10,actions=resubmit(,90),bucket=bucket_id:1,weight:20,actions=output:2"; got != want {
		t.Errorf("group text\n got %s\nwant %s", got, want)
	}
	if _, err := openflow.Marshal(1, gm); err != nil {
		t.Errorf("encode: %v", err)
	}
	g.Group.Buckets[0].Actions = []flow.Action{flow.Resubmit(flow.GotoTable("q.private"))}
	if _, err := GroupMod(flow.OpAdd, g, ctx("p")); err == nil || !strings.Contains(err.Error(), "private to plugin") {
		t.Errorf("resubmit into another plugin's private table: %v", err)
	}
}

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
			Actions: []flow.Action{flow.Conntrack(flow.CT{Zone: 1, Resume: flow.NextTable(), NAT: &flow.NAT{}})}},
			"cookie=0x1000100000000, table=40, priority=10,ip actions=ct(table=90,zone=1,nat)"},
		{"route with field match and rewrite", flow.Flow{Table: "route", Priority: 100, Tag: 9,
			Match:   flow.Match{}.IPv4().IPv4DstPrefix(netip.MustParsePrefix("10.1.0.0/16")).Field(mark, 3).CTState(flow.CTTracked|flow.CTEstablished, flow.CTTracked|flow.CTEstablished|flow.CTNew),
			Actions: []flow.Action{flow.SetEthDst(mac), flow.DecTTL(), flow.LoadField(mark, 7)}, Goto: flow.GotoStage(flow.StageOutput)},
			"cookie=0x1000100000009, table=90, priority=100,ct_state=-new+est+trk,ip,reg0=0x60/0x1fe0,nw_dst=10.1.0.0/16 actions=set_field:aa:bb:cc:00:00:01->eth_dst,dec_ttl,set_field:0xe0/0x1fe0->reg0,goto_table:200"},
		{"output by register", flow.Flow{Table: "out", Priority: 1, Actions: []flow.Action{flow.OutputField(flow.FieldTargetPort)}},
			"cookie=0x1000100000000, table=200, priority=1 actions=output:NXM_NX_REG1[]"},
		{"tcp drop", flow.Flow{Table: "route", Priority: 300, Match: flow.Match{}.TCP4().TCPDst(23)},
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
	gm, err := GroupMod(flow.OpAdd, g, &Context{})
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

// BenchmarkTranslate is the host's cost per flow of each action type:
// translate the resolved flow (ofxlate.FlowMod) and encode it for the
// switch (openflow.Marshal).
func BenchmarkTranslate(b *testing.B) {
	a := vocabArbiter(b)
	for _, s := range flowtest.Actions("next") {
		r, err := a.Resolve("p", &flow.Flow{Table: "class", Priority: 5, Match: flow.Match{}.IPv4().IPv4Dst(netip.MustParseAddr("10.1.2.3")), Actions: []flow.Action{s.Action}})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(s.Name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 512)
			for b.Loop() {
				m, err := FlowMod(flow.OpAdd, r)
				if err != nil {
					b.Fatal(err)
				}
				if buf, err = openflow.AppendMessage(buf[:0], 1, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestReverseRoundTrip: every golden flow, encoded as the switch would
// send it back in a flow stats reply, decodes and reverse-translates into
// a flow that resolves to the same switch flow, with the plugin's table
// name, tag and register fields.
func TestReverseRoundTrip(t *testing.T) {
	a := pipeline.New()
	mark := flow.Field{Name: "mark", Width: 8}
	wide := flow.Field{Name: "wide", Width: 8}
	if _, err := a.Register("p", []sdk.Table{
		{Name: "class", Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier},
		{Name: "ct", Pipeline: flow.PipelineIP, Stage: flow.StageConntrackState},
		{Name: "route", Pipeline: flow.PipelineIP, Stage: flow.StageRouting},
		{Name: "out", Pipeline: flow.PipelineIP, Stage: flow.StageOutput},
	}, []flow.Field{mark, wide}, flowtest.Resources()...); err != nil {
		t.Fatal(err)
	}
	p, _ := a.Plugin("p")
	mac := net.HardwareAddr{0xaa, 0xbb, 0xcc, 0, 0, 1}
	flows := []flow.Flow{
		{Table: "class", Priority: 200, Match: flow.Match{}.InPort(3).EthSrc(mac),
			Actions: []flow.Action{flow.LoadField(flow.FieldPacketSource, 1)}, Goto: flow.GotoPipeline(flow.PipelineIP, flow.StageConntrackState)},
		{Table: "ct", Priority: 10, Match: flow.Match{}.IPv4(),
			Actions: []flow.Action{flow.Conntrack(flow.CT{Commit: true, Zone: 5, Resume: flow.NextTable(), NAT: &flow.NAT{Kind: flow.NATReverse}, Mark: 1, MarkMask: 3})}},
		{Table: "route", Priority: 100, Tag: 9, IdleTimeout: 30, HardTimeout: 60,
			Match:   flow.Match{}.IPv4().IPv4DstPrefix(netip.MustParsePrefix("10.1.0.0/16")).Field(mark, 3).FieldMasked(wide, 0x10, 0xf0).CTState(flow.CTTracked|flow.CTEstablished, flow.CTTracked|flow.CTEstablished|flow.CTNew),
			Actions: []flow.Action{flow.SetEthDst(mac), flow.DecTTL(), flow.LoadField(mark, 0xff), flow.MoveField(mark, wide)}, Goto: flow.GotoStage(flow.StageOutput)},
		{Table: "out", Priority: 1, Actions: []flow.Action{flow.OutputField(flow.FieldTargetPort)}},
		{Table: "route", Priority: 300, Match: flow.Match{}.TCP4().TCPDst(23)},
		{Table: "route", Priority: 200, Tag: 0xffffffff, Match: flow.Match{}.IPv4().IPv4Src(netip.MustParseAddr("10.0.0.1")), Actions: []flow.Action{flow.Conjunction(9, 1, 2)}},
		{Table: "route", Priority: 200, Match: flow.Match{}.IPv4().ConjID(9), Goto: flow.GotoStage(flow.StageOutput)},
		{Table: "route", Priority: 5, Match: flow.Match{}.ARP().ARPTpa(netip.MustParseAddr("10.0.0.1")).VlanVID(7),
			Actions: []flow.Action{flow.SetARPOp(2), flow.SetARPSha(mac), flow.SetARPSpa(netip.MustParseAddr("10.0.0.1")), flow.OutputInPort(), flow.Controller(128, []byte("hi")), flow.Controller(0xffff, nil), flow.ApplyGroup(3), flow.ApplyMeter(4), flow.Normal(), flow.PushVLAN(0x8100), flow.PopVLAN(), flow.SetTunID(5), flow.SetTunDst(netip.MustParseAddr("192.168.0.2")), flow.Output(4)}},
	}
	fields := flow.WellKnownBits()
	for n, b := range p.Bits {
		fields[n] = b
	}
	rev := &Reverse{Owner: "p", Prefix: p.Prefix, Fields: fields, Table: func(id uint8) (string, bool) {
		tb, ok := a.TableByID(id)
		return tb.Name, ok
	}}
	for _, f := range flows {
		t.Run(f.String(), func(t *testing.T) {
			r, err := a.Resolve("p", &f)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Flow(r)
			if err != nil {
				t.Fatal(err)
			}
			// Through the wire, as a flow stats reply.
			b, err := openflow.Marshal(1, &openflow.FlowStatsReply{Flows: []openflow.FlowStats{{Flow: want, PacketCount: 3}}})
			if err != nil {
				t.Fatal(err)
			}
			_, m, _, err := openflow.DecodeMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rev.FromFlow(&m.(*openflow.FlowStatsReply).Flows[0].Flow)
			if err != nil {
				t.Fatal(err)
			}
			if got.Table != f.Table || got.Tag != f.Tag || got.IdleTimeout != f.IdleTimeout || got.Key() != f.Key() {
				t.Errorf("read back %s, installed %s", got, &f)
			}
			r2, err := a.Resolve("p", got)
			if err != nil {
				t.Fatalf("read-back flow does not resolve: %v", err)
			}
			again, err := Flow(r2)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.String(), again.String()); diff != "" {
				t.Errorf("switch flow after a round trip (-installed +read back):\n%s", diff)
			}
		})
	}
	// A register bit that is none of the plugin's fields is refused, named.
	_, err := rev.FromMatch(openflow.Match{openflow.Reg(9, 1, 1)})
	if !errors.Is(err, sdk.ErrUnallocatedField) || !strings.Contains(err.Error(), "reg9") {
		t.Errorf("foreign register bits: %v", err)
	}
}
