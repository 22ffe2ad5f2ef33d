package fastwire_test

import (
	"net"
	"net/netip"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/flow/flowtest"
	"switchyard.dev/switchyard/sdk/internal/fastwire"
	"switchyard.dev/switchyard/sdk/internal/fromproto"
	"switchyard.dev/switchyard/sdk/internal/toproto"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

var mark = flow.Field{Name: "mark", Width: 8}

// allFields lets cmp look into unexported fields (flow.Operand, netip.Addr).
var allFields = cmp.Exporter(func(reflect.Type) bool { return true })

// sample uses every match kind, action kind and jump once, plus groups and
// meters (meters first, then groups, then flows: the order Decode returns).
func sample() *flow.Batch {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	m := flow.Match{}.InPort(1).EthSrc(mac).EthDstMasked(mac, net.HardwareAddr{1, 0, 0, 0, 0, 0}).VlanVID(10).
		TCP4().IPv4SrcPrefix(netip.MustParsePrefix("10.0.0.0/8")).IPv4Dst(netip.MustParseAddr("10.1.1.1")).TCPSrc(1).TCPDstMasked(0x400, 0xfc00).
		CTState(flow.CTTracked, flow.CTTracked|flow.CTNew).CTZone(4).CTMark(1, 3).TunID(77).TunDst(netip.MustParseAddr("192.0.2.1")).
		Metadata(5, 0xff).Field(mark, 9).FieldMasked(flow.FieldPacketSource, 1, 3)
	m6 := flow.Match{}.IPv6().IPv6SrcPrefix(netip.MustParsePrefix("fd00::/64")).IPProto(flow.ProtoUDP).UDPSrc(53).UDPDst(53)
	arp := flow.Match{}.ARP().ARPOp(1).ARPSpa(netip.MustParseAddr("10.0.0.1")).ARPTpaPrefix(netip.MustParsePrefix("10.0.0.0/24")).ARPSha(mac).ARPTha(mac)
	acts := []flow.Action{
		flow.Output(3), flow.OutputField(flow.FieldTargetPort), flow.OutputInPort(), flow.Normal(), flow.DecTTL(),
		flow.PopVLAN(), flow.PushVLAN(0x8100), flow.ApplyGroup(2), flow.ApplyMeter(3), flow.LoadField(mark, 7),
		flow.MoveField(mark, flow.Field{Name: "mark2", Width: 8}), flow.Controller(128, []byte{1, 2}),
		flow.SetEthSrc(mac), flow.SetIPv4Dst(netip.MustParseAddr("10.0.0.8")), flow.SetTunID(5), flow.SetVlanVID(7),
		flow.Conntrack(flow.CT{Commit: true, Zone: 9, Resume: flow.GotoStage(flow.StageConntrack), Mark: 1, MarkMask: 1, NAT: &flow.NAT{}}),
		flow.Conntrack(flow.CT{}),
	}
	return flow.NewBatch().
		AddMeter(flow.Meter{ID: 3, Unit: flow.MeterPktps, Bands: []flow.MeterBand{{Rate: 100, Burst: 10}}}).
		AddGroup(flow.Group{ID: 2, Type: flow.GroupSelect, Buckets: []flow.Bucket{{Weight: 5, WatchPort: 1, Actions: []flow.Action{flow.Output(1)}}}}).
		AddGroup(flow.Group{ID: 3, Type: flow.GroupSelect, Selection: &flow.Selection{Method: flow.SelectHash, Fields: []flow.MatchKind{flow.MatchIPv4Src, flow.MatchTCPSrc}},
			Buckets: []flow.Bucket{{Weight: 10, Actions: []flow.Action{flow.Resubmit(flow.GotoTable("z")), flow.Note([]byte("b"))}}, {Weight: 20, Actions: []flow.Action{flow.Output(2)}}}}).
		DeleteGroup(9).
		AddFlows(
			flow.Flow{Table: "a", Priority: 100, Match: m, Actions: acts, Goto: flow.NextTable(), Tag: 42, IdleTimeout: 10, HardTimeout: 20},
			flow.Flow{Table: "b", Priority: 1, Match: m6, Goto: flow.GotoPipeline(flow.PipelineIP, flow.StageRouting)},
			flow.Flow{Table: "c", Match: arp, Goto: flow.GotoTable("d")},
			flow.Flow{Table: "e"},
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

func texts(b *flow.Batch) []string {
	var out []string
	for _, o := range b.Ops {
		out = append(out, o.String())
	}
	return out
}

// TestAgreesWithGeneratedCode: what Append writes, the generated code
// reads as the same message toproto builds; what the generated code
// writes, Decode reads as fromproto does.
func TestAgreesWithGeneratedCode(t *testing.T) {
	in := sample()
	raw, err := fastwire.Append(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	var got pb.Batch
	if err := proto.Unmarshal(raw, &got); err != nil {
		t.Fatalf("generated code cannot read fastwire output: %v", err)
	}
	if diff := cmp.Diff(toproto.Batch(in), &got, protocmp.Transform()); diff != "" {
		t.Errorf("fastwire encoding differs from the generated one (-generated +fastwire):\n%s", diff)
	}
	genRaw, err := proto.Marshal(toproto.Batch(in))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := fastwire.Decode(genRaw)
	if err != nil {
		t.Fatal(err)
	}
	want := fromproto.Batch(&got)
	if diff := cmp.Diff(texts(want), texts(dec)); diff != "" {
		t.Errorf("Decode differs from fromproto (-fromproto +fastwire):\n%s", diff)
	}
	for i := range want.Ops {
		if w, d := want.Ops[i].Flow, dec.Ops[i].Flow; w != nil {
			if diff := cmp.Diff(w.Match.Fields(), d.Match.Fields()); diff != "" {
				t.Errorf("op %d match (-fromproto +fastwire):\n%s", i, diff)
			}
			if diff := cmp.Diff(w.Actions, d.Actions, allFields); diff != "" {
				t.Errorf("op %d actions (-fromproto +fastwire):\n%s", i, diff)
			}
		}
	}
	if diff := cmp.Diff(texts(in), texts(dec)); diff != "" {
		t.Errorf("round trip (-in +out):\n%s", diff)
	}
}

// FuzzDecode: Decode never panics, and when the generated code also
// accepts the bytes, both read the same batch.
func FuzzDecode(f *testing.F) {
	raw, _ := fastwire.Append(nil, sample())
	f.Add(raw)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		dec, err := fastwire.Decode(data)
		var m pb.Batch
		genErr := proto.Unmarshal(data, &m)
		if err != nil || genErr != nil {
			return
		}
		if diff := cmp.Diff(texts(fromproto.Batch(&m)), texts(dec)); diff != "" {
			t.Errorf("Decode and the generated code disagree:\n%s", diff)
		}
	})
}

func BenchmarkBatchWire5000(b *testing.B) {
	batch := flow.NewBatch()
	for i := range 5000 {
		a := netip.AddrFrom4([4]byte{10, byte(128 + i>>16&0x7f), byte(i >> 8), byte(i)})
		batch.AddFlows(flow.Flow{Table: "beta.ingress", Priority: 10, Match: flow.Match{}.IPv4().IPv4Dst(a), Actions: []flow.Action{flow.Output(uint32(1 + i%8))}})
	}
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		var err error
		buf, err = fastwire.Append(buf[:0], batch)
		if err != nil {
			b.Fatal(err)
		}
		raw := append([]byte(nil), buf...) // gRPC hands the host its own copy
		got, err := fastwire.Decode(raw)
		if err != nil || got.Len() != 5000 {
			b.Fatal(got.Len(), err)
		}
	}
}

// BenchmarkActionWire is the plugin-side encode (Append) and the
// host-side decode (Decode) cost of each action type, per flow: 1000
// flows, each with one nw_dst match and the action.
func BenchmarkActionWire(b *testing.B) {
	for _, s := range flowtest.Actions("t") {
		batch := flow.NewBatch()
		for i := range 1000 {
			a := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
			batch.AddFlows(flow.Flow{Table: "beta.ingress", Priority: 10, Match: flow.Match{}.IPv4().IPv4Dst(a), Actions: []flow.Action{s.Action}})
		}
		raw, err := fastwire.Append(nil, batch)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("encode/"+s.Name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, len(raw))
			for b.Loop() {
				if buf, err = fastwire.Append(buf[:0], batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/flow")
		})
		b.Run("decode/"+s.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fastwire.Decode(raw); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/flow")
		})
	}
}

// TestFlowRoundTrip: every flow of the sample survives AppendFlow and
// DecodeFlow unchanged, and the decoded flow does not alias the bytes.
func TestFlowRoundTrip(t *testing.T) {
	for _, op := range sample().Ops {
		if op.Flow == nil {
			continue
		}
		raw := fastwire.AppendFlow(nil, op.Flow)
		got, err := fastwire.DecodeFlow(raw)
		if err != nil {
			t.Fatalf("DecodeFlow(%s): %v", op.Flow, err)
		}
		for i := range raw {
			raw[i] = 0xff
		}
		if diff := cmp.Diff(op.Flow.String(), got.String()); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

func FuzzDecodeFlow(f *testing.F) {
	for _, op := range sample().Ops {
		if op.Flow != nil {
			f.Add(fastwire.AppendFlow(nil, op.Flow))
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := fastwire.DecodeFlow(data)
		if err != nil {
			return
		}
		// What decodes re-encodes to something that decodes the same.
		again, err := fastwire.DecodeFlow(fastwire.AppendFlow(nil, got))
		if err != nil {
			t.Fatalf("re-encoded flow %s does not decode: %v", got, err)
		}
		if diff := cmp.Diff(got.String(), again.String()); diff != "" {
			t.Errorf("re-encode changed the flow (-first +second):\n%s", diff)
		}
	})
}
