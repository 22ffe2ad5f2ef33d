package openflow

import (
	"net"
	"net/netip"
	"testing"
)

// benchFlows builds n realistic flows: pod forwarding and conjunction
// clauses, as the host installs them.
func benchFlows(n int) []FlowMod {
	mods := make([]FlowMod, n)
	for i := range mods {
		var f Flow
		switch i % 3 {
		case 0, 1:
			f = Flow{Table: 10, Priority: 200, Cookie: 0x1_0000_0000 | uint64(i),
				Match: Match{EthType(0x0800), Addr(FieldIPv4Dst, netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))},
				Instructions: []Instruction{Apply(
					Set(MAC(FieldEthSrc, net.HardwareAddr{0x0a, 0x58, 0, 0, 0, 1})),
					Set(MAC(FieldEthDst, net.HardwareAddr{0x0a, 0x58, 0, byte(i >> 16), byte(i >> 8), byte(i)})),
					Load(FieldReg1, 0, 16, uint64(i)),
					DecTTL{},
				), Goto(11)}}
		default:
			f = Flow{Table: 10, Priority: 300, Cookie: 0x2_0000_0000,
				Match:        Match{EthType(0x0800), IPProto(6), Exact(FieldTCPDst, uint64(i%65535)), Reg(2, uint32(i), 0xffffffff)},
				Instructions: []Instruction{Apply(Conjunction{ID: uint32(i / 64), Clause: 2, NClauses: 2})}}
		}
		mods[i] = FlowMod{Command: FlowAdd, Flow: f}
	}
	return mods
}

// BenchmarkEncodeFlowMod encodes flow mods wrapped in BUNDLE_ADD, as
// Conn.Bundle does, into one reused buffer. Reported per flow.
func BenchmarkEncodeFlowMod(b *testing.B) {
	mods := benchFlows(1024)
	buf := make([]byte, 0, 1<<20)
	add := &BundleAdd{ID: 1, Flags: BundleAtomic | BundleOrdered}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(buf) > 1<<20-512 {
			buf = buf[:0]
		}
		add.Xid, add.Message = uint32(i), &mods[i%len(mods)]
		var err error
		if buf, err = AppendMessage(buf, add.Xid, add); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeFlowStats decodes a flow stats reply of 64 flows.
func BenchmarkDecodeFlowStats(b *testing.B) {
	mods := benchFlows(64)
	rep := &FlowStatsReply{}
	for _, m := range mods {
		rep.Flows = append(rep.Flows, FlowStats{Flow: m.Flow})
	}
	raw, err := Marshal(1, rep)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, _, err := DecodeMessage(raw); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*64), "ns/flow")
}

func TestEncodeDoesNotAllocate(t *testing.T) {
	mods := benchFlows(16)
	buf := make([]byte, 0, 64<<10)
	add := &BundleAdd{ID: 1}
	allocs := testing.AllocsPerRun(100, func() {
		buf = buf[:0]
		for i := range mods {
			add.Xid, add.Message = uint32(i), &mods[i]
			buf, _ = AppendMessage(buf, add.Xid, add)
		}
	})
	if allocs != 0 {
		t.Errorf("encoding 16 flow mods into a reused buffer allocates %v times, want 0", allocs)
	}
}
