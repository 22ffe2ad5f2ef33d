package openflow

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	of "switchyard.dev/switchyard/host/openflow"
)

// coverageFlows uses every match field and action the codec supports, one
// flow each (so a rejection names the culprit). The switch itself is the
// witness: each must install, dump-flows must print exactly Flow.String(),
// and our flow stats must decode back to the same values.
func coverageFlows() []of.Flow {
	ip := netip.MustParseAddr
	pfx := netip.MustParsePrefix
	mac := func(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }
	v4, v6, arp := of.EthType(0x0800), of.EthType(0x86dd), of.EthType(0x0806)
	tcp, udp, sctp, icmp, icmp6 := of.IPProto(6), of.IPProto(17), of.IPProto(132), of.IPProto(1), of.IPProto(58)
	trk := of.CTState(of.CTTrk, of.CTInv)
	apply := func(a ...of.Action) []of.Instruction { return []of.Instruction{of.Apply(a...)} }
	out := of.Output{Port: 1}
	ms := []struct {
		m   of.Match
		ins []of.Instruction
	}{
		{of.Match{of.InPort(3)}, apply(out)},
		{of.Match{of.MAC(of.FieldEthSrc, mac("00:11:22:33:44:55")), of.MACMasked(of.FieldEthDst, mac("01:00:00:00:00:00"), mac("01:00:00:00:00:00")), of.EthType(0x88cc)}, apply(out)},
		{of.Match{of.VLANID(10), of.Exact(of.FieldVLANPCP, 5)}, apply(of.PopVLAN{}, out)},
		{of.Match{v4, of.Exact(of.FieldIPDSCP, 10), of.Exact(of.FieldIPECN, 2), of.Exact(of.FieldIPTTL, 3), of.IPProto(47)}, apply(out)},
		{of.Match{v4, of.Prefix(of.FieldIPv4Src, pfx("10.0.0.0/8")), of.Addr(of.FieldIPv4Dst, ip("10.1.2.3"))}, apply(of.DecTTL{}, out)},
		{of.Match{v6, of.Prefix(of.FieldIPv6Src, pfx("fd00::/8")), of.Addr(of.FieldIPv6Dst, ip("fd00::1"))}, apply(out)},
		{of.Match{v4, tcp, of.Masked(of.FieldTCPSrc, 0x400, 0xfc00), of.Exact(of.FieldTCPDst, 443)}, apply(of.Set(of.Exact(of.FieldTCPDst, 8443)), out)},
		{of.Match{v6, udp, of.Exact(of.FieldUDPSrc, 53), of.Exact(of.FieldUDPDst, 53)}, apply(of.Set(of.Exact(of.FieldUDPSrc, 5353)), out)},
		{of.Match{v4, sctp, of.Exact(of.FieldSCTPSrc, 9), of.Exact(of.FieldSCTPDst, 10)}, apply(of.Set(of.Exact(of.FieldSCTPDst, 11)), out)},
		{of.Match{v4, icmp, of.Exact(of.FieldICMPv4Type, 8), of.Exact(of.FieldICMPv4Code, 0)}, apply(of.Set(of.Exact(of.FieldICMPv4Type, 0)), of.Output{Port: of.PortInPort})},
		{of.Match{v6, icmp6, of.Exact(of.FieldICMPv6Type, 135), of.Exact(of.FieldICMPv6Code, 0), of.Addr(of.FieldNDTarget, ip("fe80::1")), of.MAC(of.FieldNDSLL, mac("00:11:22:33:44:55"))}, apply(of.Set(of.Exact(of.FieldICMPv6Type, 136)), out)},
		{of.Match{v6, icmp6, of.Exact(of.FieldICMPv6Type, 136), of.MAC(of.FieldNDTLL, mac("00:11:22:33:44:66"))}, apply(of.Set(of.MAC(of.FieldNDTLL, mac("00:11:22:33:44:77"))), out)},
		{of.Match{arp, of.Exact(of.FieldARPOp, 1), of.Addr(of.FieldARPSPA, ip("10.0.0.1")), of.Prefix(of.FieldARPTPA, pfx("10.0.0.0/24")), of.MAC(of.FieldARPSHA, mac("00:11:22:33:44:55")), of.MAC(of.FieldARPTHA, mac("00:00:00:00:00:00"))},
			apply(of.Move{Src: of.Whole(of.FieldEthSrc), Dst: of.Whole(of.FieldEthDst)}, of.Set(of.MAC(of.FieldEthSrc, mac("0a:58:00:00:00:01"))), of.Load(of.FieldARPOp, 0, 16, 2),
				of.Move{Src: of.Whole(of.FieldARPSHA), Dst: of.Whole(of.FieldARPTHA)}, of.Move{Src: of.Whole(of.FieldARPSPA), Dst: of.Whole(of.FieldARPTPA)},
				of.Set(of.MAC(of.FieldARPSHA, mac("0a:58:00:00:00:01"))), of.Set(of.Addr(of.FieldARPSPA, ip("10.0.0.254"))), of.Output{Port: of.PortInPort})},
		{of.Match{v4, tcp, of.Masked(of.FieldTCPFlags, 0x002, 0x012)}, apply(out)},
		{of.Match{v6, tcp, of.Exact(of.FieldTCPFlags, 0x012)}, apply(out)},
		{of.Match{of.Addr(of.FieldTunIPv6Src, ip("fd01::1")), of.Prefix(of.FieldTunIPv6Dst, pfx("fd01::/64"))}, apply(of.Set(of.Addr(of.FieldTunIPv6Dst, ip("fd01::9"))), out)},
		{of.Match{of.Masked(of.FieldTunID, 0x10, 0xf0), of.Addr(of.FieldTunIPv4Src, ip("192.168.0.1")), of.Prefix(of.FieldTunIPv4Dst, pfx("192.168.0.0/16"))}, apply(out)},
		{of.Match{of.Masked(of.FieldMetadata, 0x1, 0xff), of.Reg(0, 1, 0xffff), of.Uint128(of.FieldXXReg3, 0, 0x5, 0, 0xff)}, apply(of.Set(of.Uint128(of.FieldXXReg2, 0, 9, 0, 0xff)), out)},
		{of.Match{of.Masked(of.FieldPktMark, 1, 1), of.Exact(of.FieldConjID, 42), v4}, []of.Instruction{of.Apply(of.Set(of.Masked(of.FieldPktMark, 2, 2))), of.WriteMetadata{Metadata: 0x100, Mask: 0xf00}, of.Goto(9)}},
		{of.Match{v4, trk, of.Exact(of.FieldCTZone, 7), of.Masked(of.FieldCTMark, 1, 1), of.Uint128(of.FieldCTLabel, 1, 0, 1, 0)}, apply(of.CTClear{}, out)},
		{of.Match{v4, trk, of.Addr(of.FieldCTNwSrc, ip("10.0.0.1")), of.Prefix(of.FieldCTNwDst, pfx("10.96.0.0/12")), of.Exact(of.FieldCTNwProto, 6), of.Exact(of.FieldCTTpSrc, 1000), of.Masked(of.FieldCTTpDst, 0x50, 0xfff0)}, apply(out)},
		{of.Match{v6, trk, of.Addr(of.FieldCTIPv6Src, ip("fd00::1")), of.Prefix(of.FieldCTIPv6Dst, pfx("fd00::/64"))}, apply(out)},
		{of.Match{v4}, apply(of.CT{Commit: true, ZoneSrc: of.Bits(of.FieldReg5, 0, 16), Recirc: true, Table: 9,
			NAT:  &of.NAT{Flags: of.NATSrc | of.NATPersistent | of.NATRandom, MinAddr: ip("10.0.0.1"), MaxAddr: ip("10.0.0.9"), MinPort: 1000, MaxPort: 2000},
			Exec: []of.Action{of.Set(of.Masked(of.FieldCTMark, 1, 1)), of.Set(of.Uint128(of.FieldCTLabel, 0, 1, 0, 1))}})},
		{of.Match{v4, tcp}, apply(of.CT{Commit: true, Zone: 3, NAT: &of.NAT{Flags: of.NATDst, MinAddr: ip("10.0.0.5"), MinPort: 8080}}, of.CT{Force: true, Commit: true, Alg: 21})},
		{of.Match{v6}, apply(of.CT{Commit: true, NAT: &of.NAT{Flags: of.NATSrc | of.NATProtoHash, MinAddr: ip("fd00::1"), MaxAddr: ip("fd00::2"), MinPort: 1, MaxPort: 9}}, of.CT{NAT: &of.NAT{}})},
		{of.Match{v4}, apply(of.Conjunction{ID: 7, Clause: 1, NClauses: 3})},
		{of.Match{v4, tcp}, apply(of.Learn{Table: 9, IdleTimeout: 30, HardTimeout: 300, FinIdleTimeout: 1, FinHardTimeout: 2, Priority: 90, Flags: of.LearnDeleteLearned | of.LearnSendFlowRem, Cookie: 0x77, Specs: []of.LearnSpec{
			{Kind: of.LearnMatch, Imm: 0x800, Dst: of.Whole(of.FieldEthType)},
			{Kind: of.LearnMatch, Imm: 6, Dst: of.Whole(of.FieldIPProto)},
			{Kind: of.LearnMatch, Src: of.Whole(of.FieldIPv4Src), Dst: of.Whole(of.FieldIPv4Dst)},
			{Kind: of.LearnMatch, Src: of.Whole(of.FieldTCPSrc), Dst: of.Whole(of.FieldTCPDst)},
			{Kind: of.LearnLoad, Src: of.Bits(of.FieldReg3, 0, 16), Dst: of.Bits(of.FieldReg3, 0, 16)},
			{Kind: of.LearnLoad, Imm: 1, Dst: of.Bits(of.FieldReg0, 5, 1)},
			{Kind: of.LearnOutput, Src: of.Bits(of.FieldReg1, 0, 16)},
		}}, of.ResubmitTable(9))},
		{nil, apply(of.Controller{Reason: of.ReasonNoMatch, MaxLen: 128, ID: 2, Userdata: []byte{1, 2, 3}, Pause: true, MeterID: 3}, of.Output{Port: of.PortController, MaxLen: 64})},
		{nil, apply(of.Meter{ID: 3}, of.Group{ID: 5}, of.Note{Data: []byte("switch")}, of.Resubmit{Port: 2, Table: 9}, of.Resubmit{Port: 2, Table: of.TableNone})},
		{nil, apply(of.PushVLAN{EtherType: 0x8100}, of.Set(of.VLANID(20)), of.Output{Port: 2, MaxLen: 100}, of.OutputReg{Src: of.Whole(of.FieldReg4)}, of.Output{Port: of.PortLocal}, of.Output{Port: of.PortNormal})},
		{of.Match{v4}, apply(of.Set(of.Addr(of.FieldIPv4Src, ip("10.0.0.1"))), of.Set(of.Prefix(of.FieldIPv4Dst, pfx("10.9.0.0/16"))), of.Set(of.Exact(of.FieldIPDSCP, 46)), of.Set(of.Exact(of.FieldIPECN, 1)), of.Set(of.Exact(of.FieldIPTTL, 64)))},
		{of.Match{v6}, apply(of.Set(of.Addr(of.FieldIPv6Src, ip("fd00::9"))), of.Set(of.Prefix(of.FieldIPv6Dst, pfx("fd00:1::/32"))))},
		{nil, apply(of.Set(of.Exact(of.FieldTunID, 100)), of.Set(of.Addr(of.FieldTunIPv4Dst, ip("192.168.0.9"))), of.Set(of.Addr(of.FieldTunIPv4Src, ip("192.168.0.1"))), of.Set(of.Masked(of.FieldMetadata, 4, 0xf)),
			of.Set(of.MACMasked(of.FieldEthDst, mac("00:00:00:00:00:01"), mac("00:00:00:00:00:ff"))), of.Load(of.FieldReg15, 31, 1, 1))},
		{nil, []of.Instruction{of.ClearActions{}, of.WriteActions{Actions: []of.Action{of.Output{Port: 2}}}}},
	}
	flows := make([]of.Flow, len(ms))
	for i, m := range ms {
		flows[i] = of.Flow{Table: 5, Priority: uint16(100 + i), Cookie: uint64(0xc0000 + i), Match: m.m, Instructions: m.ins}
	}
	return flows
}

func TestEveryFieldAndActionOnLiveSwitch(t *testing.T) {
	sw, c := startSwitch(t, "of-coverage", of.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The group and meter some flows refer to.
	if _, err := c.Request(ctx, &of.GroupMod{Command: of.GroupAdd, Type: of.GroupTypeAll, GroupID: 5, Buckets: []of.Bucket{{Actions: []of.Action{of.Output{Port: 1}}}}}); err != nil {
		t.Fatalf("group add: %v", err)
	}
	if _, err := c.Request(ctx, &of.MeterMod{Command: of.MeterAdd, Flags: of.MeterPktps, MeterID: 3, Bands: []of.MeterBand{{Type: 1, Rate: 100}}}); err != nil {
		t.Fatalf("meter add: %v", err)
	}
	flows := coverageFlows()
	for i := range flows {
		fm := of.AddFlow(flows[i])
		if _, err := c.Request(ctx, &fm); err != nil {
			t.Errorf("switch rejected flow %d: %v", i, err)
		}
	}
	dump := dumpOfctl(t, sw)
	if len(dump) != len(flows) {
		t.Errorf("dump-flows shows %d flows, want %d", len(dump), len(flows))
	}
	if diff := cmp.Diff(texts(flows), dump); diff != "" {
		t.Errorf("ovs-ofctl dump-flows differs from Flow.String (-ours +ovs):\n%s", diff)
	}
	for _, l := range dump {
		t.Log(l)
	}
	got := dumpOurs(t, c, of.FlowStatsRequest{Table: of.TableAll})
	if diff := cmp.Diff(normalize(flows), normalize(got), cmpOpts...); diff != "" {
		t.Errorf("flow stats decode differs from installed flows (-want +got):\n%s", diff)
	}
}
