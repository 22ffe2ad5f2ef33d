package flow

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMatchText(t *testing.T) {
	mac := net.HardwareAddr{0xaa, 0, 0, 0, 0, 1}
	f := Field{Name: "mark", Width: 8}
	cases := []struct {
		name string
		m    Match
		want string
	}{
		{"empty", Match{}, ""},
		{"order is canonical, not call order", Match{}.IPv4Dst(netip.MustParseAddr("10.0.0.2")).InPort(3).IPv4(), "ip,in_port=3,nw_dst=10.0.0.2"},
		{"tcp shorthand hides eth_type and proto", Match{}.TCP4().TCPDst(80), "tcp,tp_dst=80"},
		{"deprecated TCP still means IPv4", Match{}.TCP().TCPDst(80), "tcp,tp_dst=80"},
		{"tcp6", Match{}.TCP6().TCPSrcMasked(0x400, 0xfc00), "tcp6,tp_src=0x400/0xfc00"},
		{"udp6", Match{}.UDP6().UDPSrc(53), "udp6,tp_src=53"},
		{"sctp prints tp_src like ovs-ofctl", Match{}.SCTP4().SCTPSrc(9).SCTPDstMasked(0x100, 0xff00), "sctp,tp_src=9,tp_dst=0x100/0xff00"},
		{"sctp6", Match{}.SCTP6().SCTPDst(10), "sctp6,tp_dst=10"},
		{"tcp_flags masked", Match{}.TCP4().TCPFlags(TCPSyn, TCPSyn|TCPAck), "tcp,tcp_flags=+syn-ack"},
		{"tcp_flags exact", Match{}.TCP4().TCPFlags(TCPSyn|TCPAck, 0xfff), "tcp,tcp_flags=syn|ack"},
		{"icmp6 and nd", Match{}.ICMP6().ICMPv6Type(135).ICMPv6Code(0).NDTarget(netip.MustParseAddr("fe80::1")).NDSLL(mac).NDTLL(mac),
			"icmp6,icmp_type=135,icmp_code=0,nd_target=fe80::1,nd_sll=aa:00:00:00:00:01,nd_tll=aa:00:00:00:00:01"},
		{"icmp4", Match{}.ICMP4().ICMPType(8), "icmp,icmp_type=8"},
		{"ct_label masked", Match{}.CTLabel(Uint128{Hi: 1, Lo: 2}, Uint128{Hi: 1, Lo: 0xff}), "ct_label=0x10000000000000002/0x100000000000000ff"},
		{"ct_label exact", Match{}.CTLabel(Uint128{Lo: 5}, Uint128{Hi: ^uint64(0), Lo: ^uint64(0)}), "ct_label=0x5"},
		{"ct tuple v4", Match{}.CTNwSrc(netip.MustParsePrefix("10.0.0.1/32")).CTNwDst(netip.MustParsePrefix("10.96.0.0/12")).CTNwProto(6).CTTpSrc(1000).CTTpDstMasked(0x50, 0xfff0),
			"ct_nw_src=10.0.0.1,ct_nw_dst=10.96.0.0/12,ct_nw_proto=6,ct_tp_src=1000,ct_tp_dst=0x50/0xfff0"},
		{"ct tuple v6", Match{}.CTIPv6Src(netip.MustParsePrefix("fd00::1/128")).CTIPv6Dst(netip.MustParsePrefix("fd00::/64")), "ct_ipv6_src=fd00::1,ct_ipv6_dst=fd00::/64"},
		{"pkt_mark", Match{}.PktMark(1, 3), "pkt_mark=0x1/0x3"},
		{"tunnel v4 and v6", Match{}.TunSrcPrefix(netip.MustParsePrefix("192.168.0.0/16")).TunDstPrefix(netip.MustParsePrefix("fd01::/64")), "tun_src=192.168.0.0/16,tun_ipv6_dst=fd01::/64"},
		{"dscp prints as nw_tos, ecn", Match{}.IPv4().IPDSCP(46).IPECN(1), "ip,nw_tos=184,nw_ecn=1"},
		{"ipv6 exact", Match{}.IPv6().IPv6Src(netip.MustParseAddr("fd00::1")), "ipv6,ipv6_src=fd00::1"},
		{"dual-stack prefix picks the field", Match{}.IPSrc(netip.MustParsePrefix("10.0.0.0/8")).IPDst(netip.MustParsePrefix("fd00::/8")), "ipv6_dst=fd00::/8,nw_src=10.0.0.0/8"},
		{"masked port", Match{}.UDP().UDPDstMasked(0x400, 0xfc00), "udp,tp_dst=0x400/0xfc00"},
		{"prefix", Match{}.IPv4().IPv4SrcPrefix(netip.MustParsePrefix("10.1.2.3/16")), "ip,nw_src=10.1.0.0/16"},
		{"full-length prefix is exact", Match{}.IPv4().IPv4SrcPrefix(netip.MustParsePrefix("10.1.2.3/32")), "ip,nw_src=10.1.2.3"},
		{"mac and masked mac", Match{}.EthSrc(mac).EthDstMasked(mac, net.HardwareAddr{1, 0, 0, 0, 0, 0}), "dl_src=aa:00:00:00:00:01,dl_dst=00:00:00:00:00:00/01:00:00:00:00:00"},
		{"ct_state", Match{}.CTState(CTTracked|CTEstablished, CTTracked|CTEstablished|CTNew), "ct_state=-new+est+trk"},
		{"register field by name", Match{}.Field(f, 5).FieldMasked(FieldPacketSource, 1, 3), "reg:mark=0x5,reg:sdk.pkt_source=0x1/0x3"},
		{"arp", Match{}.ARP().ARPTpa(netip.MustParseAddr("10.0.0.1")), "arp,arp_tpa=10.0.0.1"},
		{"same kind twice keeps the last", Match{}.InPort(1).InPort(2), "in_port=2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.m.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestActionText is the golden text of each action kind, symbolic (the
// host's resolved text, checked against ovs-ofctl, is in itest/host).
func TestActionText(t *testing.T) {
	mac := net.HardwareAddr{0x0a, 0x58, 0, 0, 0, 1}
	mark := Field{Name: "mark", Width: 8}
	port := Field{Name: "port", Width: 16}
	cases := []struct {
		a    Action
		want string
	}{
		{Output(3), "output:3"},
		{&ActOutput{Port: PortLocal}, "LOCAL"},
		{OutputField(port), "output:reg:port"},
		{OutputInPort(), "IN_PORT"},
		{Normal(), "NORMAL"},
		{Controller(0, nil), "CONTROLLER:65535"},
		{Controller(128, []byte{1, 2}), "controller(max_len=128,userdata=01.02)"},
		{ControllerMetered(0, nil, ReasonNoMatch, 3), "controller(reason=no_match,meter_id=3)"},
		{SetEthSrc(mac), "set_field:0a:58:00:00:00:01->eth_src"},
		{SetIPv4Dst(netip.MustParseAddr("10.0.0.8")), "set_field:10.0.0.8->ip_dst"},
		{SetIPv6Src(netip.MustParseAddr("fd00::9")), "set_field:fd00::9->ipv6_src"},
		{SetTunDst(netip.MustParseAddr("192.168.0.9")), "set_field:192.168.0.9->tun_dst"},
		{SetTunDst(netip.MustParseAddr("fd01::9")), "set_field:fd01::9->tun_ipv6_dst"},
		{SetTunID(100), "set_field:0x64->tun_id"},
		{SetPktMark(2, 2), "set_field:0x2/0x2->pkt_mark"},
		{SetPktMark(7, 0xffffffff), "set_field:0x7->pkt_mark"},
		{SetIPDSCP(46), "set_field:46->ip_dscp"},
		{LoadField(mark, 7), "load:0x7->reg:mark"},
		{MoveField(mark, Field{Name: "m2", Width: 8}), "move:reg:mark->reg:m2"},
		{Move(Header(MatchIPv4Src), Reg(Field{Name: "a", Width: 32})), "move:NXM_OF_IP_SRC[]->reg:a"},
		{Move(Reg(port), Header(MatchTCPDst)), "move:reg:port->NXM_OF_TCP_DST[]"},
		{Move(HeaderBits(MatchEthSrc, 0, 8), Reg(mark)), "move:NXM_OF_ETH_SRC[0..7]->reg:mark"},
		{Move(Header(MatchEthSrc), Header(MatchEthDst)), "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]"},
		{Conntrack(CT{Zone: 5}), "ct(zone=5)"},
		{Conntrack(CT{Commit: true, NAT: &NAT{Kind: NATSrc, MinAddr: netip.MustParseAddr("10.0.0.1"), MaxAddr: netip.MustParseAddr("10.0.0.9"),
			MinPort: 1000, MaxPort: 2000, Persistent: true, Selection: NATRandom}}), "ct(commit,nat(src=10.0.0.1-10.0.0.9:1000-2000,persistent,random))"},
		{Conntrack(CT{Commit: true, NAT: &NAT{Kind: NATDst, MinAddr: netip.MustParseAddr("fd00::5"), MinPort: 80, Selection: NATHash}}), "ct(commit,nat(dst=[fd00::5]:80,hash))"},
		{Conntrack(CT{NAT: &NAT{}, Resume: GotoTable("x")}), "ct(table=@x,nat)"},
		{Conntrack(CT{Commit: true, Mark: 1, MarkMask: 1, Label: Uint128{Lo: 0x10}, LabelMask: Uint128{Lo: 0xf0}}), "ct(commit,exec(set_field:0x1/0x1->ct_mark,set_field:0x10/0xf0->ct_label))"},
		{Conntrack(CT{Commit: true, Mark: 0, MarkMask: 0xffffffff}), "ct(commit,exec(set_field:0->ct_mark))"},
		{CTClear(), "ct_clear"},
		{ApplyGroup(2), "group:2"},
		{ApplyMeter(3), "meter:3"},
		{DecTTL(), "dec_ttl"},
		{PushVLAN(0x8100), "push_vlan:0x8100"},
		{PopVLAN(), "pop_vlan"},
		{Conjunction(9, 1, 2), "conjunction(9,1/2)"},
		{Resubmit(GotoTable("svc.lb")), "resubmit(,@svc.lb)"},
		{Note([]byte("ab")), "note:61.62.00.00.00.00"},
		{Note([]byte("policy-7")), "note:70.6f.6c.69.63.79.2d.37.00.00.00.00.00.00"},
		{Learn(ActLearn{Table: "aff", IdleTimeout: 30, HardTimeout: 300, Priority: 90, Specs: []LearnSpec{
			LearnMatchValue(Header(MatchEthType), 0x800), LearnMatchValue(Header(MatchIPProto), 6),
			LearnMatchPacket(Header(MatchIPv4Src)), LearnMatchFrom(Header(MatchTCPDst), Header(MatchTCPSrc)),
			LearnLoadFrom(Reg(port), Reg(port)), LearnLoadValue(1, Reg(mark)),
		}}), "learn(table=@aff,idle_timeout=30,hard_timeout=300,priority=90,eth_type=0x800,nw_proto=6,NXM_OF_IP_SRC[],NXM_OF_TCP_DST[]=NXM_OF_TCP_SRC[],load:reg:port->reg:port,load:0x1->reg:mark)"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			if err := tc.a.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if diff := cmp.Diff(tc.want, tc.a.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestActionValidate(t *testing.T) {
	ip := netip.MustParseAddr
	mark := Field{Name: "mark", Width: 8}
	cases := []struct {
		name string
		a    Action
		want string
	}{
		{"move width mismatch", Move(Header(MatchIPv4Src), Reg(mark)), "widths differ (32 vs 8)"},
		{"move into a read-only header", Move(Reg(Field{Name: "z", Width: 16}), Header(MatchCTZone)), "ct_zone is read-only"},
		{"move bits outside the header", Move(HeaderBits(MatchTCPDst, 10, 8), Reg(mark)), "outside header field tcp_dst"},
		{"empty operand", Move(Operand{}, Reg(mark)), "neither a register field nor a header"},
		{"nat without address", Conntrack(CT{Commit: true, NAT: &NAT{Kind: NATSrc}}), "needs an address"},
		{"nat mixed families", Conntrack(CT{Commit: true, NAT: &NAT{Kind: NATDst, MinAddr: ip("10.0.0.1"), MaxAddr: ip("fd00::1")}}), "not ordered within one family"},
		{"nat ports reversed", Conntrack(CT{Commit: true, NAT: &NAT{Kind: NATDst, MinAddr: ip("10.0.0.1"), MinPort: 9, MaxPort: 2}}), "port range 9-2"},
		{"reverse nat with options", Conntrack(CT{NAT: &NAT{Persistent: true}}), "reverse nat takes no address"},
		{"label without commit", Conntrack(CT{LabelMask: Uint128{Lo: 1}}), "needs commit"},
		{"learn without table", Learn(ActLearn{Specs: []LearnSpec{LearnMatchPacket(Header(MatchIPv4Src))}}), "no table"},
		{"learn value too wide", Learn(ActLearn{Table: "t", Specs: []LearnSpec{LearnMatchValue(Header(MatchIPProto), 300)}}), "does not fit 8 bits"},
		{"learn load into a read-only header", Learn(ActLearn{Table: "t", Specs: []LearnSpec{LearnLoadValue(1, Header(MatchCTMark))}}), "read-only"},
		{"resubmit without target", Resubmit(Jump{}), "without a target"},
		{"note too long", Note(make([]byte, 300)), "at most 256"},
		{"set_field mask on a non-mark field", &ActSetField{Kind: MatchEthSrc, Value: make([]byte, 6), Mask: make([]byte, 6)}, "only pkt_mark"},
		{"set_field of a read-only field", &ActSetField{Kind: MatchCTMark, Value: make([]byte, 4)}, "not supported"},
		{"controller meter out of range", ControllerMetered(0, nil, ReasonAction, 5000), "meter id 5000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestGroupSelection(t *testing.T) {
	g := Group{ID: 1, Type: GroupSelect, Selection: &Selection{Method: SelectHash, Fields: []MatchKind{MatchIPv4Src, MatchTCPSrc}},
		Buckets: []Bucket{{Weight: 10, Actions: []Action{Resubmit(GotoTable("t"))}}}}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := g.String(), "group_id=1,type=select,selection_method=hash,fields(ip_src,tcp_src),bucket=weight:10,actions=resubmit(,@t)"; got != want {
		t.Errorf("group text %q, want %q", got, want)
	}
	bad := Group{ID: 1, Type: GroupAll, Selection: &Selection{Method: SelectHash}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "needs a select group") {
		t.Errorf("selection on an all group: %v", err)
	}
	bad = Group{ID: 1, Type: GroupSelect, Selection: &Selection{Method: SelectHash, Fields: []MatchKind{MatchCTState}}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "cannot hash ct_state") {
		t.Errorf("hash on ct_state: %v", err)
	}
}

func TestMatchIsImmutable(t *testing.T) {
	base := Match{}.IPv4()
	a := base.InPort(1)
	b := base.InPort(2)
	if base.String() != "ip" || a.String() != "ip,in_port=1" || b.String() != "ip,in_port=2" {
		t.Errorf("shared prefix changed: base %q a %q b %q", base, a, b)
	}
}

func TestFlowText(t *testing.T) {
	f := Flow{Table: "podnet.class", Priority: 100, Match: Match{}.InPort(3).IPv4(),
		Actions: []Action{LoadField(FieldPacketSource, PacketSourceLocal), Conntrack(CT{Commit: true, Zone: 2, Resume: GotoStage(StageConntrack)})},
		Goto:    NextTable()}
	want := "table=podnet.class, priority=100, ip,in_port=3 actions=load:0x1->reg:sdk.pkt_source,ct(commit,table=@stage:Conntrack,zone=2),goto_table:@next"
	if diff := cmp.Diff(want, f.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	clause := Flow{Table: "np", Priority: 200, Match: Match{}.IPv4().IPv4Src(netip.MustParseAddr("10.0.0.1")), Actions: []Action{Conjunction(9, 1, 2)}}
	if got, want := clause.String(), "table=np, priority=200, ip,nw_src=10.0.0.1 actions=conjunction(9,1/2)"; got != want {
		t.Errorf("conjunction clause text %q, want %q", got, want)
	}
	if got, want := (Match{}.ConjID(9)).String(), "conj_id=9"; got != want {
		t.Errorf("conj_id match text %q, want %q", got, want)
	}
	drop := Flow{Table: "t", Priority: 1}
	if got := drop.String(); got != "table=t, priority=1 actions=drop" {
		t.Errorf("drop flow text %q", got)
	}
	g := Group{ID: 1, Type: GroupSelect, Buckets: []Bucket{{Weight: 1, Actions: []Action{Output(1)}}, {Weight: 2, Actions: []Action{Output(2)}}}}
	if got := g.String(); got != "group_id=1,type=select,bucket=weight:1,actions=output:1,bucket=weight:2,actions=output:2" {
		t.Errorf("group text %q", got)
	}
	m := Meter{ID: 3, Unit: MeterPktps, Bands: []MeterBand{{Rate: 10, Burst: 2}}}
	if got := m.String(); got != "meter=3,pktps,bands=type=drop rate=10 burst_size=2" {
		t.Errorf("meter text %q", got)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		b    *Batch
		want string // "" = valid
	}{
		{"valid", NewBatch().AddFlows(Flow{Table: "t", Match: Match{}.InPort(1)}), ""},
		{"no table", NewBatch().AddFlows(Flow{}), "flow has no table"},
		{"value too wide for field", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{LoadField(Field{Name: "f", Width: 2}, 4)}}), `value 0x4 does not fit field "f" of 2 bits`},
		{"field width out of range", NewBatch().AddFlows(Flow{Table: "t", Match: Match{}.Field(Field{Name: "f", Width: 33}, 1)}), "width 33 out of range"},
		{"move widths differ", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{MoveField(Field{Name: "a", Width: 2}, Field{Name: "b", Width: 3})}}), "widths differ"},
		{"bad push_vlan", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{PushVLAN(0x1234)}}), "TPID 0x1234"},
		{"group id 0", NewBatch().AddGroup(Group{}), "group id 0 out of range"},
		{"ct in bucket", NewBatch().AddGroup(Group{ID: 1, Buckets: []Bucket{{Actions: []Action{Conntrack(CT{})}}}}), "not allowed in a bucket"},
		{"meter without band", NewBatch().AddMeter(Meter{ID: 1}), "needs at least one band"},
		{"op with two objects", &Batch{Ops: []Op{{Kind: OpAdd, Flow: &Flow{Table: "t"}, Group: &Group{ID: 1}}}}, "exactly one of flow, group, meter"},
		{"conjunction clause", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{Conjunction(7, 1, 3), Conjunction(8, 2, 2)}}), ""},
		{"conjunction clause beyond count", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{Conjunction(7, 4, 3)}}), "1 <= clause <= clauses"},
		{"conjunction of one clause", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{Conjunction(7, 1, 1)}}), "2 <= clauses <= 64"},
		{"conjunction with other actions", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{Conjunction(7, 1, 2), Output(1)}}), "no other actions and no jump"},
		{"conjunction with a jump", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{Conjunction(7, 1, 2)}, Goto: NextTable()}), "no other actions and no jump"},
		{"ct tuple without ct_state", NewBatch().AddFlows(Flow{Table: "t", Match: Match{}.IPv4().CTNwProto(6)}), "needs CTState(CTTracked, CTTracked|CTInvalid)"},
		{"ct tuple with +trk-inv", NewBatch().AddFlows(Flow{Table: "t", Match: Match{}.IPv4().CTState(CTTracked, CTTracked|CTInvalid).CTNwProto(6)}), ""},
		{"delete needs only the key", NewBatch().DeleteFlows(Flow{Table: "t", Actions: []Action{nil}}), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseStagePipeline(t *testing.T) {
	for _, s := range Stages() {
		got, err := ParseStage(s.String())
		if err != nil || got != s {
			t.Errorf("ParseStage(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseStage("Nope"); err == nil || !strings.Contains(err.Error(), "Classifier") {
		t.Errorf("bad stage error %v should list the stages", err)
	}
	if p, err := ParsePipeline("arp"); err != nil || p != PipelineARP {
		t.Errorf("ParsePipeline(arp) = %v, %v", p, err)
	}
}

// TestMatchOfUnsorted: fields from the wire in any order come out in
// canonical order, the last of a repeated kind winning, in O(n log n)
// (a peer may send many).
func TestMatchOfUnsorted(t *testing.T) {
	a := Match{}.InPort(1).Fields()[0]
	b := Match{}.InPort(2).Fields()[0]
	ip := Match{}.IPv4().Fields()[0]
	if got := MatchOf(ip, a, b).String(); got != "ip,in_port=2" {
		t.Errorf("MatchOf(ip, in_port=1, in_port=2) = %q", got)
	}
	many := make([]MatchField, 0, 100001)
	for i := range 100000 {
		many = append(many, Match{}.InPort(uint32(i)).Fields()[0])
	}
	many = append(many, ip)
	if got := MatchOf(many...).String(); got != "ip,in_port=99999" {
		t.Errorf("MatchOf of 100001 fields = %q", got)
	}
}
