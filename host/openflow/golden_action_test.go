package openflow

import (
	"testing"
)

// goldenActions: each action list goes into a flow matching tcp (so
// every set_field has its prerequisites) and is checked like goldenFlows.
var goldenActions = []struct {
	name  string
	match Match
	ins   []Instruction
	want  string // text after "actions="
}{
	{"output", nil, acts(Output{Port: 1}), "output:1"},
	{"output special", nil, acts(Output{Port: PortInPort}, Output{Port: PortLocal}, Output{Port: PortNormal}, Output{Port: PortFlood}, Output{Port: PortAll}), "IN_PORT,LOCAL,NORMAL,FLOOD,ALL"},
	{"output controller", nil, acts(Output{Port: PortController, MaxLen: 128}), "CONTROLLER:128"},
	{"output controller full", nil, acts(Output{Port: PortController}), "CONTROLLER:65535"},
	{"output truncate", nil, acts(Output{Port: 2, MaxLen: 100}), "output(port=2,max_len=100)"},
	{"group", nil, acts(Group{ID: 3}), "group:3"},
	{"push pop vlan", nil, acts(PushVLAN{EtherType: 0x8100}, PopVLAN{}), "push_vlan:0x8100,pop_vlan"},
	{"dec_ttl", Match{ipv4}, acts(DecTTL{}), "dec_ttl"},
	{"meter", nil, acts(Meter{ID: 3}, Output{Port: 1}), "meter:3,output:1"},
	{"resubmit table", nil, acts(ResubmitTable(5)), "resubmit(,5)"},
	{"resubmit port table", nil, acts(Resubmit{Port: 1, Table: 4}), "resubmit(1,4)"},
	{"resubmit port", nil, acts(Resubmit{Port: 5, Table: TableNone}), "resubmit:5"},
	{"goto", nil, []Instruction{Goto(9)}, "goto_table:9"},
	{"write_metadata", nil, []Instruction{WriteMetadata{Metadata: 1, Mask: 0xff}, Goto(9)}, "write_metadata:0x1/0xff,goto_table:9"},
	{"write_metadata exact", nil, []Instruction{WriteMetadata{Metadata: 1, Mask: ^uint64(0)}}, "write_metadata:0x1"},
	{"clear write actions", nil, []Instruction{ClearActions{}, WriteActions{Actions: []Action{Output{Port: 2}}}}, "clear_actions,write_actions(output:2)"},
	{"set_field eth", nil, acts(Set(MAC(FieldEthSrc, mac("00:11:22:33:44:55"))), Set(MAC(FieldEthDst, mac("00:11:22:33:44:66")))), "set_field:00:11:22:33:44:55->eth_src,set_field:00:11:22:33:44:66->eth_dst"},
	{"set_field ipv4", Match{ipv4}, acts(Set(Addr(FieldIPv4Src, ip("10.0.0.1"))), Set(Addr(FieldIPv4Dst, ip("10.0.0.2")))), "set_field:10.0.0.1->ip_src,set_field:10.0.0.2->ip_dst"},
	{"set_field ipv6", Match{ipv6}, acts(Set(Addr(FieldIPv6Src, ip("2001:db8::1"))), Set(Addr(FieldIPv6Dst, ip("2001:db8::2")))), "set_field:2001:db8::1->ipv6_src,set_field:2001:db8::2->ipv6_dst"},
	{"set_field ip bits", Match{ipv4}, acts(Set(Exact(FieldIPDSCP, 5)), Set(Exact(FieldIPECN, 1)), Set(Exact(FieldIPTTL, 9))), "set_field:5->ip_dscp,set_field:1->nw_ecn,set_field:9->nw_ttl"},
	{"set_field tcp", Match{ipv4, tcp}, acts(Set(Exact(FieldTCPSrc, 10)), Set(Exact(FieldTCPDst, 20))), "set_field:10->tcp_src,set_field:20->tcp_dst"},
	{"set_field udp", Match{ipv4, udp}, acts(Set(Exact(FieldUDPSrc, 10)), Set(Exact(FieldUDPDst, 20))), "set_field:10->udp_src,set_field:20->udp_dst"},
	{"set_field sctp", Match{ipv4, IPProto(132)}, acts(Set(Exact(FieldSCTPSrc, 10)), Set(Exact(FieldSCTPDst, 20))), "set_field:10->sctp_src,set_field:20->sctp_dst"},
	{"set_field icmp", Match{ipv4, IPProto(1)}, acts(Set(Exact(FieldICMPv4Type, 0)), Set(Exact(FieldICMPv4Code, 1))), "set_field:0->icmp_type,set_field:1->icmp_code"},
	{"set_field icmpv6 nd", Match{ipv6, IPProto(58), Exact(FieldICMPv6Type, 136)}, acts(Set(Exact(FieldICMPv6Type, 136)), Set(Exact(FieldICMPv6Code, 0)), Set(Addr(FieldNDTarget, ip("fe80::1"))), Set(MAC(FieldNDTLL, mac("00:11:22:33:44:55")))),
		"set_field:136->icmpv6_type,set_field:0->icmpv6_code,set_field:fe80::1->nd_target,set_field:00:11:22:33:44:55->nd_tll"},
	{"set_field nd_sll", Match{ipv6, IPProto(58), Exact(FieldICMPv6Type, 135)}, acts(Set(MAC(FieldNDSLL, mac("00:11:22:33:44:55")))), "set_field:00:11:22:33:44:55->nd_sll"},
	{"set_field arp", Match{arp}, acts(Set(Exact(FieldARPOp, 2)), Set(Addr(FieldARPSPA, ip("10.0.0.1"))), Set(Addr(FieldARPTPA, ip("10.0.0.2"))), Set(MAC(FieldARPSHA, mac("00:11:22:33:44:55"))), Set(MAC(FieldARPTHA, mac("00:11:22:33:44:66")))),
		"set_field:2->arp_op,set_field:10.0.0.1->arp_spa,set_field:10.0.0.2->arp_tpa,set_field:00:11:22:33:44:55->arp_sha,set_field:00:11:22:33:44:66->arp_tha"},
	{"set_field tunnel", nil, acts(Set(Exact(FieldTunID, 3)), Set(Addr(FieldTunIPv4Src, ip("1.1.1.1"))), Set(Addr(FieldTunIPv4Dst, ip("1.1.1.2")))), "set_field:0x3->tun_id,set_field:1.1.1.1->tun_src,set_field:1.1.1.2->tun_dst"},
	{"set_field metadata", nil, acts(Set(Masked(FieldMetadata, 0x10, 0xf0))), "set_field:0x10/0xf0->metadata"},
	{"set_field regs", nil, acts(Set(Exact(FieldReg3, 1)), Set(Exact(FieldReg4, 0)), Load(FieldReg0, 0, 8, 1), Load(FieldReg1, 4, 4, 3)), "set_field:0x1->reg3,set_field:0->reg4,set_field:0x1/0xff->reg0,set_field:0x30/0xf0->reg1"},
	{"set_field xxreg", nil, acts(Set(Uint128(FieldXXReg0, 0, 5, 0, 0xf))), "set_field:0x5/0xf->xxreg0"},
	{"set_field masked eth", nil, acts(Set(MACMasked(FieldEthDst, mac("00:00:00:00:00:01"), mac("00:00:00:00:00:ff")))), "set_field:00:00:00:00:00:01/00:00:00:00:00:ff->eth_dst"},
	{"set_field masked ip", Match{ipv4}, acts(Set(Prefix(FieldIPv4Src, pfx("10.1.0.0/16")))), "set_field:10.1.0.0/16->ip_src"},
	{"set_field masked ipv6", Match{ipv6}, acts(Set(Prefix(FieldIPv6Dst, pfx("fd00::/8")))), "set_field:fd00::/8->ipv6_dst"},
	{"set_field masked tcp", Match{ipv4, tcp}, acts(Set(Masked(FieldTCPDst, 0x100, 0xff00))), "set_field:256/0xff00->tcp_dst"},
	{"set_field masked tun", nil, acts(Set(Masked(FieldTunID, 0x10, 0xf0)), Set(Prefix(FieldTunIPv4Dst, pfx("10.0.0.0/8")))), "set_field:0x10/0xf0->tun_id,set_field:10.0.0.0/8->tun_dst"},
	{"set_field xxreg full", nil, acts(Set(Uint128(FieldXXReg3, 1, 2, ^uint64(0), ^uint64(0)))), "set_field:0x10000000000000002->xxreg3"},
	{"set_field pkt_mark", nil, acts(Set(Masked(FieldPktMark, 1, 1))), "set_field:0x1/0x1->pkt_mark"},
	{"set_field vlan", Match{Masked(FieldVLANVID, 0x1000, 0x1000)}, acts(Set(Exact(FieldVLANVID, 0x1005)), Set(Exact(FieldVLANPCP, 3))), "set_field:4101->vlan_vid,set_field:3->vlan_pcp"},
	{"move", nil, acts(Move{Src: Whole(FieldReg0), Dst: Whole(FieldReg2)}, Move{Src: Whole(FieldEthSrc), Dst: Whole(FieldEthDst)}, Move{Src: Bits(FieldReg0, 0, 6), Dst: Bits(FieldXXReg1, 3, 6)}, Move{Src: Bits(FieldReg1, 3, 1), Dst: Bits(FieldMetadata, 63, 1)}),
		"move:NXM_NX_REG0[]->NXM_NX_REG2[],move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],move:NXM_NX_REG0[0..5]->NXM_NX_XXREG1[3..8],move:NXM_NX_REG1[3]->OXM_OF_METADATA[63]"},
	{"output_reg", nil, acts(OutputReg{Src: Whole(FieldReg3)}, OutputReg{Src: Bits(FieldReg4, 0, 16)}), "output:NXM_NX_REG3[],output:NXM_NX_REG4[0..15]"},
	{"conjunction", Match{ipv4}, acts(Conjunction{ID: 3, Clause: 1, NClauses: 2}, Conjunction{ID: 4, Clause: 3, NClauses: 3}), "conjunction(3,1/2),conjunction(4,3/3)"},
	{"note", nil, acts(Note{Data: []byte{1, 2, 0, 0, 0, 0}}, Note{Data: []byte{1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0}}), "note:01.02.00.00.00.00,note:01.02.03.04.05.06.07.00.00.00.00.00.00.00"},
	{"ct_clear", nil, acts(CTClear{}), "ct_clear"},
	{"ct plain", Match{ipv4}, acts(CT{}), "ct()"},
	{"ct table zone", Match{ipv4}, acts(CT{Recirc: true, Table: 3, Zone: 3}), "ct(table=3,zone=3)"},
	{"ct commit zone field exec", Match{ipv4}, acts(CT{Commit: true, ZoneSrc: Bits(FieldReg3, 0, 16), Recirc: true, Table: 5,
		NAT:  &NAT{Flags: NATSrc | NATPersistent | NATRandom, MinAddr: ip("10.0.0.1"), MaxAddr: ip("10.0.0.5"), MinPort: 100, MaxPort: 200},
		Exec: []Action{Set(Exact(FieldCTMark, 1)), Set(Uint128(FieldCTLabel, 0, 1, 0, 1))}}),
		"ct(commit,table=5,zone=NXM_NX_REG3[0..15],nat(src=10.0.0.1-10.0.0.5:100-200,persistent,random),exec(set_field:0x1->ct_mark,set_field:0x1/0x1->ct_label))"},
	{"ct force", Match{ipv4}, acts(CT{Commit: true, Force: true, Zone: 1}), "ct(commit,force,zone=1)"},
	{"ct nat reverse", Match{ipv4}, acts(CT{NAT: &NAT{}}), "ct(nat)"},
	{"ct dnat port", Match{ipv4}, acts(CT{Commit: true, NAT: &NAT{Flags: NATDst, MinAddr: ip("10.0.0.1"), MinPort: 80}}), "ct(commit,nat(dst=10.0.0.1:80))"},
	{"ct snat v6 range", Match{ipv6}, acts(CT{Commit: true, NAT: &NAT{Flags: NATSrc, MinAddr: ip("fe80::1"), MaxAddr: ip("fe80::2")}}), "ct(commit,nat(src=fe80::1-fe80::2))"},
	{"ct snat v6 port", Match{ipv6}, acts(CT{Commit: true, NAT: &NAT{Flags: NATSrc | NATProtoHash, MinAddr: ip("fe80::1"), MinPort: 1000, MaxPort: 2000}}), "ct(commit,nat(src=[fe80::1]:1000-2000,hash))"},
	{"ct alg", Match{ipv4, tcp}, acts(CT{Commit: true, Alg: 21}), "ct(commit,alg=ftp)"},
	{"controller2", nil, acts(Controller{Reason: ReasonNoMatch, Userdata: []byte{1, 2}, Pause: true, MeterID: 3}), "controller(reason=no_match,userdata=01.02,pause,meter_id=3)"},
	{"controller2 id maxlen", nil, acts(Controller{Reason: ReasonAction, MaxLen: 128, ID: 7}), "controller(max_len=128,id=7)"},
	{"controller2 plain", nil, acts(Controller{Reason: ReasonAction, MaxLen: 64}), "CONTROLLER:64"},
	{"learn affinity", Match{ipv4, tcp}, acts(Learn{Table: 7, HardTimeout: 300, Priority: 190, Flags: LearnDeleteLearned, Cookie: 0x5, Specs: []LearnSpec{
		{Kind: LearnMatch, Imm: 0x800, Dst: Whole(FieldEthType)},
		{Kind: LearnMatch, Imm: 6, Dst: Whole(FieldIPProto)},
		{Kind: LearnMatch, Src: Whole(FieldTCPDst), Dst: Whole(FieldTCPDst)},
		{Kind: LearnMatch, Src: Whole(FieldIPv4Src), Dst: Whole(FieldIPv4Src)},
		{Kind: LearnMatch, Src: Whole(FieldIPv4Dst), Dst: Whole(FieldIPv4Src)},
		{Kind: LearnLoad, Src: Bits(FieldReg4, 0, 16), Dst: Bits(FieldReg4, 0, 16)},
		{Kind: LearnLoad, Imm: 1, Dst: Bits(FieldReg0, 19, 1)},
		{Kind: LearnOutput, Src: Bits(FieldReg1, 0, 16)},
	}}),
		"learn(table=7,hard_timeout=300,priority=190,delete_learned,cookie=0x5,eth_type=0x800,nw_proto=6,NXM_OF_TCP_DST[],NXM_OF_IP_SRC[],NXM_OF_IP_SRC[]=NXM_OF_IP_DST[],load:NXM_NX_REG4[0..15]->NXM_NX_REG4[0..15],load:0x1->NXM_NX_REG0[19],output:NXM_NX_REG1[0..15])"},
	{"learn timeouts", nil, acts(Learn{Table: 1, IdleTimeout: 10, FinIdleTimeout: 2, FinHardTimeout: 3, Flags: LearnSendFlowRem, Specs: []LearnSpec{{Kind: LearnMatch, Src: Whole(FieldInPort), Dst: Whole(FieldInPort)}}}),
		"learn(table=1,idle_timeout=10,fin_idle_timeout=2,fin_hard_timeout=3,send_flow_rem,OXM_OF_IN_PORT[])"},
}

func TestGoldenActions(t *testing.T) {
	t.Parallel()
	for _, tc := range goldenActions {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := Flow{Priority: 1, Match: tc.match, Instructions: tc.ins}
			prefix := "priority=1"
			if len(tc.match) > 0 {
				prefix += "," + tc.match.String()
			}
			checkGoldenFlow(t, f, prefix+" actions="+tc.want)
		})
	}
}
