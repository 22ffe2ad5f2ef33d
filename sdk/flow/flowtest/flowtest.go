package flowtest

import (
	"fmt"
	"net"
	"net/netip"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Register fields the samples use; a test plugin declares them.
var (
	Mark  = flow.Field{Name: "mark", Width: 8}
	Mark2 = flow.Field{Name: "mark2", Width: 8}
	Port  = flow.Field{Name: "port", Width: 16}
	Addr  = flow.Field{Name: "addr", Width: 32}
)

// Fields lists the register fields the samples use.
func Fields() []flow.Field { return []flow.Field{Mark, Mark2, Port, Addr} }

// Resources are the shared resources the samples use, for a plugin that
// registers first on a fresh host: ct zones 1 to 8 (the samples use 5 and
// 7), all 32 bits of ct_mark, the 31 low bits of pkt_mark (the host keeps
// the top bit for traces), all 64 bits of metadata and all 128 bits of
// ct_label (two grants of 64).
func Resources() []sdk.Resource {
	var rs []sdk.Resource
	for i := range 8 {
		rs = append(rs, sdk.Resource{Kind: sdk.ResourceCTZone, Name: fmt.Sprintf("flowtest.zone%d", i+1)})
	}
	return append(rs,
		sdk.Resource{Kind: sdk.ResourceCTMark, Name: "flowtest.ct_mark", Width: 32},
		sdk.Resource{Kind: sdk.ResourceMetadata, Name: "flowtest.metadata", Width: 64},
		sdk.Resource{Kind: sdk.ResourcePktMark, Name: "flowtest.pkt_mark", Width: 31},
		sdk.Resource{Kind: sdk.ResourceCTLabel, Name: "flowtest.ct_label_lo", Width: 64},
		sdk.Resource{Kind: sdk.ResourceCTLabel, Name: "flowtest.ct_label_hi", Width: 64})
}

// Named is a sample with a name for subtests.
type Named struct {
	Name   string
	Action flow.Action
}

// Actions returns at least one sample of every action type. Samples that
// need a table name use table (a table the test plugin may write, later
// than the flow's), groups the local group ID 1 and meters the local meter
// ID 1.
func Actions(table string) []Named {
	mac := net.HardwareAddr{0x0a, 0x58, 0, 0, 0, 1}
	return []Named{
		{"output", flow.Output(3)},
		{"output_field", flow.OutputField(Port)},
		{"in_port", flow.OutputInPort()},
		{"normal", flow.Normal()},
		{"controller", flow.Controller(128, []byte{1, 2})},
		{"controller_metered", flow.ControllerMetered(0, []byte{9}, flow.ReasonNoMatch, 1)},
		{"set_eth_src", flow.SetEthSrc(mac)},
		{"set_ipv6_dst", flow.SetIPv6Dst(netip.MustParseAddr("fd00::9"))},
		{"set_tun_dst", flow.SetTunDst(netip.MustParseAddr("192.168.0.9"))},
		{"set_tun_id", flow.SetTunID(100)},
		{"set_pkt_mark", flow.SetPktMark(0x2, 0x2)},
		{"set_vlan_vid", flow.SetVlanVID(20)},
		{"set_sctp_dst", flow.SetL4Port(flow.MatchSCTPDst, 8080)},
		{"load", flow.LoadField(Mark, 7)},
		{"move_reg", flow.MoveField(Mark, Mark2)},
		{"move_header_to_reg", flow.Move(flow.Header(flow.MatchIPv4Src), flow.Reg(Addr))},
		{"move_reg_to_header", flow.Move(flow.Reg(Port), flow.Header(flow.MatchTCPDst))},
		{"move_header_bits", flow.Move(flow.HeaderBits(flow.MatchEthSrc, 0, 8), flow.Reg(Mark))},
		{"ct", flow.Conntrack(flow.CT{Zone: 5})},
		{"ct_snat", flow.Conntrack(flow.CT{Commit: true, Zone: 5, NAT: &flow.NAT{Kind: flow.NATSrc,
			MinAddr: netip.MustParseAddr("10.0.0.1"), MaxAddr: netip.MustParseAddr("10.0.0.9"), MinPort: 1000, MaxPort: 2000,
			Persistent: true, Selection: flow.NATRandom}})},
		{"ct_dnat_label", flow.Conntrack(flow.CT{Commit: true, NAT: &flow.NAT{Kind: flow.NATDst, MinAddr: netip.MustParseAddr("10.96.0.5"), MinPort: 8080, Selection: flow.NATHash},
			Mark: 1, MarkMask: 1, Label: flow.Uint128{Lo: 0x10}, LabelMask: flow.Uint128{Lo: 0xf0}})},
		{"ct_nat_reverse", flow.Conntrack(flow.CT{NAT: &flow.NAT{}, Resume: flow.GotoTable(table)})},
		{"ct_clear", flow.CTClear()},
		{"group", flow.ApplyGroup(1)},
		{"meter", flow.ApplyMeter(1)},
		{"dec_ttl", flow.DecTTL()},
		{"push_vlan", flow.PushVLAN(0x8100)},
		{"pop_vlan", flow.PopVLAN()},
		{"conjunction", flow.Conjunction(7, 1, 2)},
		{"resubmit", flow.Resubmit(flow.GotoTable(table))},
		{"note", flow.Note([]byte("policy-7"))},
		{"learn", flow.Learn(flow.ActLearn{Table: table, IdleTimeout: 30, HardTimeout: 300, Priority: 90, Specs: []flow.LearnSpec{
			flow.LearnMatchValue(flow.Header(flow.MatchEthType), 0x800),
			flow.LearnMatchValue(flow.Header(flow.MatchIPProto), 6),
			flow.LearnMatchPacket(flow.Header(flow.MatchIPv4Src)),
			flow.LearnMatchFrom(flow.Header(flow.MatchTCPDst), flow.Header(flow.MatchTCPSrc)),
			flow.LearnLoadFrom(flow.Reg(Port), flow.Reg(Port)),
			flow.LearnLoadValue(1, flow.Reg(Mark)),
		}})},
	}
}

// Matches returns a match using each match kind at least once, each a
// valid switch match on its own (with the prerequisites it needs).
func Matches() []struct {
	Name  string
	Match flow.Match
} {
	m := flow.Match{}
	ip := netip.MustParseAddr
	pfx := netip.MustParsePrefix
	mac := net.HardwareAddr{0x0a, 0x58, 0, 0, 0, 1}
	// The ct tuple fields need a tracked, valid connection.
	trk := m.CTState(flow.CTTracked, flow.CTTracked|flow.CTInvalid)
	return []struct {
		Name  string
		Match flow.Match
	}{
		{"l2", m.InPort(3).EthSrc(mac).EthDst(mac).VlanVID(10).EthType(0x88cc)},
		{"ipv4", m.TCP4().IPv4SrcPrefix(pfx("10.0.0.0/8")).IPv4Dst(ip("10.1.2.3")).TCPSrcMasked(0x400, 0xfc00).TCPDst(80)},
		{"ipv6", m.UDP6().IPv6Src(ip("fd00::1")).IPv6DstPrefix(pfx("fd00:1::/64")).UDPSrc(53).UDPDstMasked(0x400, 0xfc00)},
		{"dual_stack_prefix", m.IPv6().IPSrc(pfx("fd00::/8")).IPDst(pfx("fd00::5/128"))},
		{"sctp4", m.SCTP4().SCTPSrc(9).SCTPDstMasked(0x100, 0xff00)},
		{"sctp6", m.SCTP6().SCTPSrcMasked(0x10, 0xfff0).SCTPDst(10)},
		{"tcp_flags", m.TCP4().TCPFlags(flow.TCPSyn, flow.TCPSyn|flow.TCPAck)},
		{"tcp_flags_exact", m.TCP6().TCPFlags(flow.TCPSyn|flow.TCPAck, 0xfff)},
		{"icmp4", m.ICMP4().ICMPType(8).ICMPCode(0)},
		{"icmp6_nd", m.ICMP6().ICMPv6Type(135).ICMPv6Code(0).NDTarget(ip("fe80::1")).NDSLL(mac)},
		{"icmp6_na", m.ICMP6().ICMPv6Type(136).NDTLL(mac)},
		{"arp", m.ARP().ARPOp(1).ARPSpa(ip("10.0.0.1")).ARPTpaPrefix(pfx("10.0.0.0/24")).ARPSha(mac).ARPTha(mac)},
		{"ct_v4", trk.IPv4().CTZone(7).CTMark(1, 1).CTLabel(flow.Uint128{Hi: 1}, flow.Uint128{Hi: 1, Lo: 0xff}).
			CTNwSrc(pfx("10.0.0.1/32")).CTNwDst(pfx("10.96.0.0/12")).CTNwProto(6).CTTpSrc(1000).CTTpDstMasked(0x50, 0xfff0)},
		{"ct_v6", trk.IPv6().CTIPv6Src(pfx("fd00::1/128")).CTIPv6Dst(pfx("fd00::/64")).CTNwProto(17).CTTpDst(53)},
		{"ct_label_exact", trk.CTLabel(flow.Uint128{Lo: 5}, flow.Uint128{Hi: ^uint64(0), Lo: ^uint64(0)})},
		{"mark_tunnel", m.PktMark(1, 1).TunID(77).TunSrcPrefix(pfx("192.168.0.1/32")).TunDstPrefix(pfx("192.168.0.0/16")).Metadata(5, 0xff)},
		{"tunnel_v6", m.TunSrcPrefix(pfx("fd01::1/128")).TunDstPrefix(pfx("fd01::/64"))},
		{"dscp_ecn", m.IPv4().IPDSCP(46).IPECN(1)},
		{"dscp_v6", m.IPv6().IPDSCP(10)},
		{"regs_conj", m.IPv4().Field(Mark, 9).FieldMasked(flow.FieldPacketSource, 1, 3).ConjID(7)},
	}
}
