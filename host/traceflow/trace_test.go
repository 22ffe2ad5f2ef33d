package traceflow

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	of "switchyard.dev/switchyard/host/openflow"
)

func ip4(s string) of.MatchField {
	a := netip.MustParseAddr(s).As4()
	return of.Bytes(of.FieldIPv4Dst, a[:], nil)
}

// pipeline: table 0 classifies by in_port and marks reg0; table 1 is a
// conjunctive allow (src port 1 AND tcp_dst 80) and drops everything
// else at low priority; table 2 outputs by reg0 after a ct recirculation
// that only new connections pass.
func testPipeline() *Pipeline {
	eth := of.Exact(of.FieldEthType, 0x0800)
	tcp := of.Exact(of.FieldIPProto, 6)
	return &Pipeline{Flows: map[uint8][]of.Flow{
		0: {
			{Table: 0, Priority: 100, Cookie: 0x1, Match: of.Match{of.Exact(of.FieldInPort, 1)},
				Instructions: []of.Instruction{of.Apply(of.Load(of.FieldReg0, 0, 16, 7)), of.Goto(1)}},
		},
		1: {
			{Table: 1, Priority: 200, Cookie: 0x2, Match: of.Match{of.Exact(of.FieldInPort, 1)},
				Instructions: []of.Instruction{of.Apply(of.Conjunction{ID: 9, Clause: 1, NClauses: 2})}},
			{Table: 1, Priority: 200, Cookie: 0x2, Match: of.Match{eth, tcp, of.Exact(of.FieldTCPDst, 80)},
				Instructions: []of.Instruction{of.Apply(of.Conjunction{ID: 9, Clause: 2, NClauses: 2})}},
			{Table: 1, Priority: 200, Cookie: 0x2, Match: of.Match{of.Exact(of.FieldConjID, 9)},
				Instructions: []of.Instruction{of.Apply(of.CT{Recirc: true, Table: 2, Zone: 3})}},
			{Table: 1, Priority: 1, Cookie: 0x3, Match: of.Match{}},
		},
		2: {
			{Table: 2, Priority: 100, Cookie: 0x4, Match: of.Match{of.Masked(of.FieldCTState, uint64(CTTrk|CTNew), uint64(CTTrk|CTNew)), eth, ip4("10.0.0.2")},
				Instructions: []of.Instruction{of.Apply(of.OutputReg{Src: of.Bits(of.FieldReg0, 0, 16)})}},
		},
	}}
}

func TestRun(t *testing.T) {
	type want struct {
		tables  []uint8
		outputs []uint32
		drops   int
		end     string
	}
	for _, tc := range []struct {
		name     string
		in, dprt uint64
		dst      string
		want     want
	}{
		{"conjunction allows, ct recirculates, output by register", 1, 80, "10.0.0.2", want{[]uint8{0, 1, 2}, []uint32{7}, 0, ""}},
		{"one clause missing: the low-priority drop", 1, 81, "10.0.0.2", want{[]uint8{0, 1}, nil, 1, "drop"}},
		{"unknown in_port: table miss", 5, 80, "10.0.0.2", want{[]uint8{0}, nil, 1, "miss"}},
		{"after ct, no flow for that address: miss", 1, 80, "10.0.0.3", want{[]uint8{0, 1, 2}, nil, 1, "miss"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPacket()
			p.Set(of.FieldInPort, tc.in)
			p.Set(of.FieldEthType, 0x0800)
			p.Set(of.FieldIPProto, 6)
			p.Set(of.FieldTCPDst, tc.dprt)
			a := netip.MustParseAddr(tc.dst).As4()
			p.SetBytes(of.FieldIPv4Dst, a[:])
			r := Run(testPipeline(), p)
			var got want
			for _, h := range r.Hops {
				got.tables = append(got.tables, h.Table)
			}
			for _, o := range r.Outputs {
				got.outputs = append(got.outputs, o.Port)
			}
			got.drops = len(r.Drops)
			if len(r.Drops) > 0 {
				got.end = r.Hops[r.Drops[0]].End
			}
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); d != "" {
				t.Errorf("trace (-want +got):\n%s\nhops: %+v", d, r.Hops)
			}
		})
	}
}

func TestXXRegSharesReg(t *testing.T) {
	p := NewPacket()
	p.Set(of.FieldReg1, 0xdeadbeef)
	if got := p.Get(of.FieldXXReg0)[4:8]; cmp.Diff([]byte{0xde, 0xad, 0xbe, 0xef}, got) != "" {
		t.Fatalf("xxreg0 bytes 4-7 = %x, want reg1", got)
	}
	p.setBits(of.Bits(of.FieldXXReg0, 0, 8), []bool{true, false, false, false, false, false, false, false})
	if got := p.Uint(of.FieldReg3); got != 1 {
		t.Fatalf("reg3 = %#x after setting xxreg0 bit 0, want 1", got)
	}
}

func TestFrameChecksums(t *testing.T) {
	for _, proto := range []uint64{6, 17, 1} {
		p := NewPacket()
		p.Set(of.FieldEthType, 0x0800)
		p.Set(of.FieldIPProto, proto)
		p.SetBytes(of.FieldIPv4Src, []byte{10, 0, 0, 1})
		p.SetBytes(of.FieldIPv4Dst, []byte{10, 0, 0, 2})
		p.Set(of.FieldTCPSrc, 40000)
		p.Set(of.FieldTCPDst, 80)
		p.Set(of.FieldUDPSrc, 40000)
		p.Set(of.FieldUDPDst, 53)
		p.Set(of.FieldICMPv4Type, 8)
		b, err := p.Frame([]byte("switchyard trace"))
		if err != nil {
			t.Fatal(err)
		}
		ip := b[14:34]
		if checksum(ip) != 0 {
			t.Errorf("proto %d: IPv4 header checksum does not verify", proto)
		}
		seg := b[34:]
		switch proto {
		case 6, 17:
			pseudo := append(append(append([]byte{}, ip[12:20]...), 0, byte(proto), byte(len(seg)>>8), byte(len(seg))), seg...)
			if checksum(pseudo) != 0 {
				t.Errorf("proto %d: L4 checksum does not verify", proto)
			}
		case 1:
			if checksum(seg) != 0 {
				t.Errorf("ICMP checksum does not verify")
			}
		}
	}
	p := NewPacket()
	p.Set(of.FieldEthType, 0x86dd)
	if _, err := p.Frame(nil); err != ErrNoFrame {
		t.Errorf("IPv6: err %v, want ErrNoFrame", err)
	}
}

// A Service's DNAT: the committed ct(nat(dst=…)) moves the traced packet
// to the endpoint, so the table after the recirculation forwards by the
// endpoint's address and the hop notes name it.
func TestDNATMovesThePacket(t *testing.T) {
	eth := of.Exact(of.FieldEthType, 0x0800)
	ep := netip.MustParseAddr("10.1.0.9")
	pl := &Pipeline{Flows: map[uint8][]of.Flow{
		0: {{Table: 0, Priority: 100, Match: of.Match{eth, ip4("10.96.0.10")},
			Instructions: []of.Instruction{of.Apply(of.CT{Commit: true, Recirc: true, Table: 1, Zone: 2,
				NAT: &of.NAT{Flags: of.NATDst, MinAddr: ep, MinPort: 8080}})}}},
		1: {
			{Table: 1, Priority: 100, Match: of.Match{eth, ip4("10.1.0.9"), of.Exact(of.FieldIPProto, 6), of.Exact(of.FieldTCPDst, 8080)},
				Instructions: []of.Instruction{of.Apply(of.Output{Port: 9})}},
			{Table: 1, Priority: 1, Match: of.Match{}},
		},
	}}
	p := NewPacket()
	p.Set(of.FieldEthType, 0x0800)
	p.Set(of.FieldIPProto, 6)
	p.Set(of.FieldTCPDst, 80)
	a := netip.MustParseAddr("10.96.0.10").As4()
	p.SetBytes(of.FieldIPv4Dst, a[:])
	r := Run(pl, p)
	if len(r.Outputs) != 1 || r.Outputs[0].Port != 9 {
		t.Fatalf("outputs %+v, want port 9 (the endpoint's); hops %+v", r.Outputs, r.Hops)
	}
	if got := netip.AddrFrom4([4]byte(r.Outputs[0].Packet.Get(of.FieldIPv4Dst))); got != ep {
		t.Errorf("output packet's destination %v, want the endpoint %v", got, ep)
	}
	if !slices.ContainsFunc(r.Hops[0].Notes, func(n string) bool { return strings.Contains(n, "translated to 10.1.0.9:8080") }) {
		t.Errorf("first hop notes %q do not name the endpoint", r.Hops[0].Notes)
	}
}
