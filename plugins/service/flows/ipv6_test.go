package flows

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var local6 = func() Local {
	l := local
	l.HairpinIP6, l.NodePortIP6, l.GatewayIP6 = DefaultHairpinIPv6, DefaultNodePortIPv6, netip.MustParseAddr("fd00:10:244:1::1")
	return l
}()

// TestStaticFlowsIPv6: with IPv6 addresses in Local, the IPv4 flows stay
// exactly as they were, and IPv6 counterparts follow them.
func TestStaticFlowsIPv6(t *testing.T) {
	v4 := strs(StaticFlows(local))
	got := strs(StaticFlows(local6))
	if d := cmp.Diff(v4, got[:len(v4)]); d != "" {
		t.Errorf("the IPv4 flows changed (-without IPv6 +with):\n%s", d)
	}
	want := []string{
		"table=service.unsnat, priority=200, ipv6,ipv6_dst=fd00:5ce::fd actions=ct(table=@next,zone=6,nat)",
		"table=service.conntrack, priority=100, ipv6 actions=ct(table=@next,zone=5,nat)",
		"table=service.ct_mark, priority=200, ct_mark=0x2/0x2,ipv6 actions=load:0x1->reg:service.hairpin,goto_table:@next",
		"table=service.snat, priority=200, ct_state=-rpl+trk,ipv6,reg:service.hairpin=0x1 actions=ct(commit,table=@next,zone=6,nat(src=fd00:5ce::fd))",
		"table=service.snat, priority=100, ipv6,ipv6_src=fd00:5ce::fc actions=set_field:02:00:00:00:00:01->eth_dst,goto_table:@next",
		"table=service.output, priority=210, ipv6,reg:sdk.output_ready=0x1,reg:service.hairpin=0x1,ipv6_src=fd00:5ce::fc actions=goto_table:@next",
		"table=service.unsnat, priority=200, ipv6,ipv6_dst=fd00:10:244:1::1 actions=ct(table=@next,zone=6,nat)",
		"table=service.ct_mark, priority=200, ct_mark=0x4/0x4,ipv6 actions=load:0x1->reg:service.snat,goto_table:@next",
		"table=service.snat, priority=200, ct_state=-rpl+trk,ipv6,reg:service.snat=0x1 actions=ct(commit,table=@next,zone=6,nat(src=fd00:10:244:1::1))",
	}
	if d := cmp.Diff(want, got[len(v4):]); d != "" {
		t.Errorf("IPv6 static flows (-want +got):\n%s", d)
	}
	for _, f := range StaticFlows(local6) {
		if err := f.Validate(); err != nil {
			t.Errorf("invalid flow %s: %v", f.String(), err)
		}
	}
}

// TestPortFlowsIPv6: an IPv6 Service port loads the endpoint's four words
// in its buckets and matches them in the dnat flows; an endpoint of the
// other family is left out.
func TestPortFlowsIPv6(t *testing.T) {
	vip := netip.MustParseAddr("fd00:10:96::a")
	ep1 := Endpoint{IP: netip.MustParseAddr("fd00:10:244:1::5"), Port: 8080, Local: true}
	ep2 := Endpoint{IP: netip.MustParseAddr("fd00:10:244:2::5"), Port: 8080}
	ep4 := Endpoint{IP: netip.MustParseAddr("10.244.2.5"), Port: 8080}
	const (
		regs1 = "reg:service.ep_ip=0x5,reg:service.ep_ip6_0=0xfd000010,reg:service.ep_ip6_1=0x2440001,reg:service.ep_ip6_2=0x0,reg:service.ep_port=0x1f90"
		regs2 = "reg:service.ep_ip=0x5,reg:service.ep_ip6_0=0xfd000010,reg:service.ep_ip6_1=0x2440002,reg:service.ep_ip6_2=0x0,reg:service.ep_port=0x1f90"
		mark1 = "exec(set_field:0x1/0x7->ct_mark)"
	)
	for _, c := range []struct {
		name      string
		port      Port
		want      []string
		wantGroup string
	}{
		{"TCP, a local and a remote endpoint, one IPv4 left out",
			Port{Proto: ProtoTCP, ClusterIP: vip, Port: 80, Group: 7, Endpoints: []Endpoint{ep1, ep2, ep4}},
			[]string{
				"table=service.lb, priority=200, ct_state=+new+trk,tcp6,ipv6_dst=fd00:10:96::a,tp_dst=80 actions=load:0x7->reg:service.svc,group:7",
				"table=service.dnat, priority=200, tcp6," + regs1 + ",reg:service.svc=0x7 actions=ct(commit,table=@next,zone=5,nat(dst=[fd00:10:244:1::5]:8080)," + mark1 + ")",
				"table=service.dnat, priority=210, tcp6," + regs1 + ",reg:service.svc=0x7,ipv6_src=fd00:10:244:1::5 actions=load:0x1->reg:service.hairpin,ct(commit,table=@next,zone=5,nat(dst=[fd00:10:244:1::5]:8080),exec(set_field:0x3/0x7->ct_mark))",
				"table=service.dnat, priority=200, tcp6," + regs2 + ",reg:service.svc=0x7 actions=ct(commit,table=@next,zone=5,nat(dst=[fd00:10:244:2::5]:8080)," + mark1 + ")",
			},
			"group_id=7,type=select,selection_method=dp_hash," +
				"bucket=weight:100,actions=load:0xfd000010->reg:service.ep_ip6_0,load:0x2440001->reg:service.ep_ip6_1,load:0x0->reg:service.ep_ip6_2,load:0x5->reg:service.ep_ip,load:0x1f90->reg:service.ep_port,resubmit(,@service.dnat)," +
				"bucket=weight:100,actions=load:0xfd000010->reg:service.ep_ip6_0,load:0x2440002->reg:service.ep_ip6_1,load:0x0->reg:service.ep_ip6_2,load:0x5->reg:service.ep_ip,load:0x1f90->reg:service.ep_port,resubmit(,@service.dnat)"},
		{"UDP with IPv4 endpoints only rejects",
			Port{Proto: ProtoUDP, ClusterIP: vip, Port: 53, Group: 8, Endpoints: []Endpoint{ep4}},
			[]string{
				"table=service.lb, priority=200, ct_state=+new+trk,udp6,ipv6_dst=fd00:10:96::a,tp_dst=53 actions=controller(max_len=128,userdata=72.65.6a.65.63.74,meter_id=1)",
			},
			""},
		{"SCTP translates its ports statelessly",
			Port{Proto: ProtoSCTP, ClusterIP: vip, Port: 80, Group: 9, Endpoints: []Endpoint{ep2}},
			[]string{
				"table=service.lb, priority=200, ct_state=+new+trk,sctp6,ipv6_dst=fd00:10:96::a,tp_dst=80 actions=load:0x9->reg:service.svc,group:9",
				"table=service.dnat, priority=200, sctp6," + regs2 + ",reg:service.svc=0x9 actions=ct(commit,table=@next,zone=5,nat(dst=fd00:10:244:2::5)," + mark1 + ")",
				"table=service.l4, priority=200, ct_state=-rpl+trk,ct_mark=0x1/0x1,sctp6,ipv6_dst=fd00:10:244:2::5,tp_dst=80 actions=set_field:8080->sctp_dst,goto_table:@next",
				"table=service.l4, priority=200, ct_state=+rpl+trk,ct_mark=0x1/0x1,sctp6,ipv6_src=fd00:10:96::a,tp_src=8080 actions=set_field:80->sctp_src,goto_table:@next",
			},
			"group_id=9,type=select,selection_method=dp_hash," +
				"bucket=weight:100,actions=load:0xfd000010->reg:service.ep_ip6_0,load:0x2440002->reg:service.ep_ip6_1,load:0x0->reg:service.ep_ip6_2,load:0x5->reg:service.ep_ip,load:0x1f90->reg:service.ep_port,resubmit(,@service.dnat)"},
		{"session affinity learns all four words",
			Port{Proto: ProtoTCP, ClusterIP: vip, Port: 80, Group: 7, Affinity: 30, Endpoints: []Endpoint{ep2}},
			[]string{
				"table=service.lb, priority=200, ct_state=+new+trk,tcp6,ipv6_dst=fd00:10:96::a,tp_dst=80 actions=move:NXM_OF_TCP_SRC[]->reg:service.ep_port,load:0x7->reg:service.svc,resubmit(,@service.affinity),goto_table:@service.select",
				"table=service.select, priority=210, reg:service.affinity=0x1,reg:service.svc=0x7 actions=goto_table:@service.dnat",
				"table=service.select, priority=200, reg:service.svc=0x7 actions=group:7",
				"table=service.dnat, priority=100, reg:service.affinity=0x1,reg:service.svc=0x7 actions=load:0x0->reg:service.affinity,group:7",
				"table=service.dnat, priority=200, tcp6," + regs2 + ",reg:service.svc=0x7 actions=learn(table=@service.affinity,idle_timeout=30,priority=200,eth_type=0x86dd,nw_proto=6,NXM_NX_IPV6_SRC[],NXM_NX_IPV6_DST[],NXM_OF_TCP_DST[]," +
					"load:reg:service.ep_ip6_0->reg:service.ep_ip6_0,load:reg:service.ep_ip6_1->reg:service.ep_ip6_1,load:reg:service.ep_ip6_2->reg:service.ep_ip6_2,load:reg:service.ep_ip->reg:service.ep_ip,load:reg:service.ep_port->reg:service.ep_port,load:0x1->reg:service.affinity)," +
					"ct(commit,table=@next,zone=5,nat(dst=[fd00:10:244:2::5]:8080)," + mark1 + ")",
			},
			"group_id=7,type=select,selection_method=dp_hash," +
				"bucket=weight:100,actions=load:0xfd000010->reg:service.ep_ip6_0,load:0x2440002->reg:service.ep_ip6_1,load:0x0->reg:service.ep_ip6_2,load:0x5->reg:service.ep_ip,load:0x1f90->reg:service.ep_port,resubmit(,@service.dnat)"},
		{"NodePort Cluster SNATs to the IPv6 gateway",
			Port{Proto: ProtoUDP, ClusterIP: DefaultNodePortIPv6, Port: 30053, Group: 11, SNAT: true, Endpoints: []Endpoint{ep2}},
			[]string{
				"table=service.lb, priority=200, ct_state=+new+trk,udp6,ipv6_dst=fd00:5ce::fc,tp_dst=30053 actions=load:0xb->reg:service.svc,group:11",
				"table=service.dnat, priority=200, udp6," + regs2 + ",reg:service.svc=0xb actions=load:0x1->reg:service.snat,ct(commit,table=@next,zone=5,nat(dst=[fd00:10:244:2::5]:8080),exec(set_field:0x5/0x7->ct_mark))",
			},
			"group_id=11,type=select,selection_method=dp_hash," +
				"bucket=weight:100,actions=load:0xfd000010->reg:service.ep_ip6_0,load:0x2440002->reg:service.ep_ip6_1,load:0x0->reg:service.ep_ip6_2,load:0x5->reg:service.ep_ip,load:0x1f90->reg:service.ep_port,resubmit(,@service.dnat)"},
		{"NodePort Local: in-cluster clients of the IPv6 family only",
			Port{Proto: ProtoTCP, ClusterIP: DefaultNodePortIPv6, Port: 30080, Group: 10, InClusterGroup: 7,
				InCluster: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}},
			[]string{
				"table=service.lb, priority=205, ct_state=+new+trk,tcp6,ipv6_src=fd00:10:244:1::/64,ipv6_dst=fd00:5ce::fc,tp_dst=30080 actions=load:0x7->reg:service.svc,group:7",
				"table=service.lb, priority=200, ct_state=+new+trk,tcp6,ipv6_dst=fd00:5ce::fc,tp_dst=30080 actions=controller(max_len=128,userdata=72.65.6a.65.63.74,meter_id=1)",
			},
			""},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.port.Service = "default/web"
			fs, g := PortFlows(local6, c.port)
			if d := cmp.Diff(c.want, strs(fs)); d != "" {
				t.Errorf("flows (-want +got):\n%s", d)
			}
			gs := ""
			if g != nil {
				gs = g.String()
				if err := g.Validate(); err != nil {
					t.Errorf("invalid group: %v", err)
				}
			}
			if d := cmp.Diff(c.wantGroup, gs); d != "" {
				t.Errorf("group (-want +got):\n%s", d)
			}
			for _, f := range fs {
				if err := f.Validate(); err != nil {
					t.Errorf("invalid flow %s: %v", f.String(), err)
				}
			}
		})
	}
}

// TestFieldsFit: every field fits one register, and with the SDK's
// well-known bits and netpol's 20 (the only other in-tree plugin that
// asks for any) the node keeps most of its 16 registers free. An
// IPv4-only plugin leaves out the IPv6 endpoint's upper 96 bits.
func TestFieldsFit(t *testing.T) {
	const registers, wellKnown, netpol = 16 * 32, 4 + 1 + 32, 20
	for _, tc := range []struct {
		ipv6 bool
		bits int
	}{{false, 75}, {true, 75 + 96}} {
		bits := 0
		for _, f := range Fields(tc.ipv6) {
			if err := f.Validate(); err != nil {
				t.Error(err)
			}
			bits += int(f.Width)
		}
		if bits != tc.bits {
			t.Errorf("ipv6=%v: the service plugin asks for %d bits, want %d", tc.ipv6, bits, tc.bits)
		}
		if used := wellKnown + netpol + bits; used > registers/2 {
			t.Errorf("ipv6=%v: the service plugin asks for %d bits; with the others %d of %d", tc.ipv6, bits, used, registers)
		}
	}
}
