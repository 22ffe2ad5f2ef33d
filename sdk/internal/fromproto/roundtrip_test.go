package fromproto_test

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/flow/flowtest"
	"switchyard.dev/switchyard/sdk/internal/fromproto"
	"switchyard.dev/switchyard/sdk/internal/toproto"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

var mark = flow.Field{Name: "mark", Width: 8}

// allFields lets cmp look into unexported fields (flow.Operand, netip.Addr).
var allFields = cmp.Exporter(func(reflect.Type) bool { return true })

// sampleBatch uses every kind of match, action, jump and object once.
func sampleBatch() *flow.Batch {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	m := flow.Match{}.InPort(1).EthSrc(mac).EthDstMasked(mac, net.HardwareAddr{1, 0, 0, 0, 0, 0}).VlanVID(10).
		TCP4().IPv4SrcPrefix(netip.MustParsePrefix("10.0.0.0/8")).IPv4Dst(netip.MustParseAddr("10.1.1.1")).TCPSrc(1).TCPDstMasked(0x400, 0xfc00).
		CTState(flow.CTTracked, flow.CTTracked|flow.CTNew).CTZone(4).CTMark(1, 3).TunID(77).TunDst(netip.MustParseAddr("192.0.2.1")).
		Metadata(5, 0xff).Field(mark, 9).FieldMasked(flow.FieldPacketSource, 1, 3)
	m6 := flow.Match{}.IPv6().IPv6SrcPrefix(netip.MustParsePrefix("fd00::/64")).IPv6DstPrefix(netip.MustParsePrefix("fd00::1/128")).IPProto(flow.ProtoUDP).UDPSrc(53).UDPDst(53)
	arp := flow.Match{}.ARP().ARPOp(1).ARPSpa(netip.MustParseAddr("10.0.0.1")).ARPTpaPrefix(netip.MustParsePrefix("10.0.0.0/24")).ARPSha(mac).ARPTha(mac)
	icmp := flow.Match{}.ICMP4().ICMPType(8).ICMPCode(0)
	acts := []flow.Action{
		flow.Output(3), flow.OutputField(flow.FieldTargetPort), flow.OutputInPort(), flow.Normal(), flow.DecTTL(),
		flow.PopVLAN(), flow.PushVLAN(0x8100), flow.ApplyGroup(2), flow.ApplyMeter(3), flow.LoadField(mark, 7),
		flow.MoveField(mark, flow.Field{Name: "mark2", Width: 8}), flow.Controller(128, []byte{1, 2}),
		flow.SetEthSrc(mac), flow.SetEthDst(mac), flow.SetIPv4Src(netip.MustParseAddr("10.0.0.9")),
		flow.SetIPv4Dst(netip.MustParseAddr("10.0.0.8")), flow.SetTunDst(netip.MustParseAddr("192.0.2.2")), flow.SetTunID(5), flow.SetVlanVID(7),
		flow.Conntrack(flow.CT{Commit: true, Zone: 9, Resume: flow.GotoStage(flow.StageConntrack), Mark: 1, MarkMask: 1, NAT: &flow.NAT{}}),
	}
	return flow.NewBatch().
		AddMeter(flow.Meter{ID: 3, Unit: flow.MeterPktps, Bands: []flow.MeterBand{{Rate: 100, Burst: 10}}}).
		ModifyMeter(flow.Meter{ID: 4, Bands: []flow.MeterBand{{Rate: 1}}}).
		AddGroup(flow.Group{ID: 2, Type: flow.GroupSelect, Buckets: []flow.Bucket{{Weight: 5, WatchPort: 1, Actions: []flow.Action{flow.Output(1)}}}}).
		AddGroup(flow.Group{ID: 3, Type: flow.GroupSelect, Selection: &flow.Selection{Method: flow.SelectHash, Fields: []flow.MatchKind{flow.MatchIPv4Src, flow.MatchTCPSrc}},
			Buckets: []flow.Bucket{{Weight: 10, Actions: []flow.Action{flow.Resubmit(flow.GotoTable("z")), flow.Note([]byte("b"))}}, {Weight: 20, Actions: []flow.Action{flow.Output(2)}}}}).
		DeleteGroup(9).
		AddFlows(
			flow.Flow{Table: "a", Priority: 100, Match: m, Actions: acts, Goto: flow.NextTable(), Tag: 42, IdleTimeout: 10, HardTimeout: 20},
			flow.Flow{Table: "b", Priority: 1, Match: m6, Goto: flow.GotoPipeline(flow.PipelineIP, flow.StageRouting)},
			flow.Flow{Table: "c", Match: arp, Goto: flow.GotoTable("d")},
			flow.Flow{Table: "e", Match: icmp, Goto: flow.GotoStage(flow.StageOutput)},
		).
		AddFlows(vocabulary()...).
		ModifyFlows(flow.Flow{Table: "a", Priority: 5}).
		DeleteFlows(flow.Flow{Table: "a", Priority: 5}).
		DeleteTagged("a", 0x1200, 0xff00).
		DeleteTagged("", 7, 0xffffffff)
}

// vocabulary is one flow per flowtest match sample and one holding every
// flowtest action (conjunction on its own, as Validate requires).
func vocabulary() []flow.Flow {
	var out []flow.Flow
	var acts []flow.Action
	for _, a := range flowtest.Actions("z") {
		if _, ok := a.Action.(*flow.ActConjunction); ok {
			out = append(out, flow.Flow{Table: "v", Priority: 2, Actions: []flow.Action{a.Action}})
			continue
		}
		acts = append(acts, a.Action)
	}
	out = append(out, flow.Flow{Table: "v", Priority: 1, Actions: acts})
	for i, m := range flowtest.Matches() {
		out = append(out, flow.Flow{Table: "v", Priority: uint16(10 + i), Match: m.Match, Actions: []flow.Action{flow.Output(1)}})
	}
	return out
}

func batchText(b *flow.Batch) []string {
	var out []string
	for _, o := range b.Ops {
		out = append(out, o.String())
	}
	return out
}

func TestBatchRoundTrip(t *testing.T) {
	in := sampleBatch()
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(toproto.Batch(in))
	if err != nil {
		t.Fatal(err)
	}
	var m pb.Batch
	if err := proto.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	out := fromproto.Batch(&m)
	if err := out.Validate(); err != nil {
		t.Fatalf("round-tripped batch invalid: %v", err)
	}
	// Text covers every field's value; Equal-style comparison checks the
	// structs too (Match has unexported fields, so compare via text + ops).
	if diff := cmp.Diff(batchText(in), batchText(out)); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
	for i := range in.Ops {
		a, b := in.Ops[i], out.Ops[i]
		if a.Flow != nil {
			if diff := cmp.Diff(a.Flow.Match.Fields(), b.Flow.Match.Fields()); diff != "" {
				t.Errorf("op %d match fields (-in +out):\n%s", i, diff)
			}
			if diff := cmp.Diff(a.Flow.Actions, b.Flow.Actions, allFields); diff != "" {
				t.Errorf("op %d actions (-in +out):\n%s", i, diff)
			}
			if a.Flow.Goto != b.Flow.Goto || a.Flow.Tag != b.Flow.Tag || a.Flow.IdleTimeout != b.Flow.IdleTimeout || a.Flow.HardTimeout != b.Flow.HardTimeout {
				t.Errorf("op %d flow header differs: %+v vs %+v", i, a.Flow, b.Flow)
			}
		}
	}
}

// FuzzBatch feeds arbitrary bytes to the host's decoding of a plugin's
// batch (the bytes come from another process): it must never panic, and
// whatever decodes must either fail Validate or re-encode to the same text.
func FuzzBatch(f *testing.F) {
	raw, err := proto.Marshal(toproto.Batch(sampleBatch()))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m pb.Batch
		if err := proto.Unmarshal(data, &m); err != nil {
			return
		}
		b := fromproto.Batch(&m)
		if b.Validate() != nil {
			return
		}
		for _, o := range b.Ops {
			_ = o.String()
		}
		again := fromproto.Batch(toproto.Batch(b))
		if diff := cmp.Diff(batchText(b), batchText(again)); diff != "" {
			t.Errorf("valid batch does not survive a second round trip:\n%s", diff)
		}
	})
}

// TestSeedCorpus keeps testdata/fuzz/FuzzBatch/sample equal to the encoded
// sampleBatch; run with UPDATE_FUZZ_SEEDS=1 after changing the wire.
func TestSeedCorpus(t *testing.T) {
	raw, err := proto.Marshal(toproto.Batch(sampleBatch()))
	if err != nil {
		t.Fatal(err)
	}
	want := "go test fuzz v1\n[]byte(" + strconv.Quote(string(raw)) + ")\n"
	path := filepath.Join("testdata", "fuzz", "FuzzBatch", "sample")
	if os.Getenv("UPDATE_FUZZ_SEEDS") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_FUZZ_SEEDS=1)", err)
	}
	if string(got) != want {
		t.Errorf("%s is stale: run with UPDATE_FUZZ_SEEDS=1", path)
	}
}

// TestEveryWireKind: every action sample gets its own ActionKind, and
// every ActionKind of the .proto is produced by some sample, so a kind
// added to one side only fails here.
func TestEveryWireKind(t *testing.T) {
	byKind := map[pb.ActionKind]string{}
	for _, s := range flowtest.Actions("t") {
		k := pb.ActionKind(toproto.Action(s.Action).GetKind())
		if k == pb.ActionKind_ACTION_UNKNOWN {
			t.Errorf("sample %s (%T) encodes as ACTION_UNKNOWN: add it to toproto.Action", s.Name, s.Action)
			continue
		}
		if prev, ok := byKind[k]; ok && reflect.TypeOf(s.Action).String() != prev {
			t.Errorf("sample %s (%T) shares kind %s with %s", s.Name, s.Action, k, prev)
		}
		byKind[k] = reflect.TypeOf(s.Action).String()
		back := fromproto.Action(toproto.Action(s.Action))
		if back == nil || reflect.TypeOf(back) != reflect.TypeOf(s.Action) {
			t.Errorf("sample %s (%T) decodes as %T: add kind %s to fromproto.Action", s.Name, s.Action, back, k)
		}
	}
	for v, name := range pb.ActionKind_name {
		if k := pb.ActionKind(v); k != pb.ActionKind_ACTION_UNKNOWN && byKind[k] == "" {
			t.Errorf("wire kind %s has no flowtest sample", name)
		}
	}
}
