package flows

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/sdk/flow"
)

var local = Local{DNATZone: 5, SNATZone: 6, MarkOffset: 0, HairpinIP: DefaultHairpinIP, GatewayIP: netip.MustParseAddr("10.244.1.1"),
	NodePortIP: DefaultNodePortIP, GatewayMAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}}

func strs(fs []flow.Flow) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

func TestStaticFlows(t *testing.T) {
	want := []string{
		"table=service.unsnat, priority=200, ip,nw_dst=169.254.0.253 actions=ct(table=@next,zone=6,nat)",
		"table=service.conntrack, priority=100, ip actions=ct(table=@next,zone=5,nat)",
		"table=service.ct_mark, priority=200, ct_mark=0x2/0x2,ip actions=load:0x1->reg:service.hairpin,goto_table:@next",
		"table=service.snat, priority=200, ct_state=-rpl+trk,ip,reg:service.hairpin=0x1 actions=ct(commit,table=@next,zone=6,nat(src=169.254.0.253))",
		"table=service.output, priority=200, reg:sdk.output_ready=0x1,reg:service.hairpin=0x1 actions=IN_PORT",
		"table=service.lb, priority=1 actions=goto_table:@service.dnat",
		// Answers of NodePort connections go back to the node's kernel,
		// which undoes its DNAT of the node address; a hairpin one too.
		"table=service.snat, priority=100, ip,nw_src=169.254.0.252 actions=set_field:02:00:00:00:00:01->eth_dst,goto_table:@next",
		"table=service.output, priority=210, ip,reg:sdk.output_ready=0x1,reg:service.hairpin=0x1,nw_src=169.254.0.252 actions=goto_table:@next",
		// A hairpin from the gateway: back out of it if routed there (a
		// host-network endpoint), else delivered (a pod through its node's
		// NodePort).
		"table=service.output, priority=220, reg:sdk.output_ready=0x1,reg:sdk.pkt_source=0x2,reg:service.hairpin=0x1,dl_dst=02:00:00:00:00:01 actions=IN_PORT",
		"table=service.output, priority=215, reg:sdk.output_ready=0x1,reg:sdk.pkt_source=0x2,reg:service.hairpin=0x1 actions=goto_table:@next",
		// NodePort with externalTrafficPolicy Cluster: SNAT to the gateway IP.
		"table=service.unsnat, priority=200, ip,nw_dst=10.244.1.1 actions=ct(table=@next,zone=6,nat)",
		"table=service.ct_mark, priority=200, ct_mark=0x4/0x4,ip actions=load:0x1->reg:service.snat,goto_table:@next",
		"table=service.snat, priority=200, ct_state=-rpl+trk,ip,reg:service.snat=0x1 actions=ct(commit,table=@next,zone=6,nat(src=10.244.1.1))",
	}
	got := strs(StaticFlows(local))
	for _, f := range StaticFlows(local) {
		if err := f.Validate(); err != nil {
			t.Errorf("invalid flow %s: %v", f.String(), err)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("static flows (-want +got):\n%s", d)
	}
}

func TestPortFlows(t *testing.T) {
	p := Port{Service: "default/web", Name: "http", Proto: ProtoTCP, ClusterIP: netip.MustParseAddr("10.96.0.10"), Port: 80, Group: 7,
		Endpoints: []Endpoint{{IP: netip.MustParseAddr("10.244.1.5"), Port: 8080, Local: true}, {IP: netip.MustParseAddr("10.244.2.5"), Port: 8080}}}
	fs, g := PortFlows(local, p)
	want := []string{
		"table=service.lb, priority=200, ct_state=+new+trk,tcp,nw_dst=10.96.0.10,tp_dst=80 actions=load:0x7->reg:service.svc,group:7",
		"table=service.dnat, priority=200, tcp,reg:service.ep_ip=0xaf40105,reg:service.ep_port=0x1f90,reg:service.svc=0x7 actions=ct(commit,table=@next,zone=5,nat(dst=10.244.1.5:8080),exec(set_field:0x1/0x7->ct_mark))",
		// The local endpoint may be its own client: hairpin.
		"table=service.dnat, priority=210, tcp,reg:service.ep_ip=0xaf40105,reg:service.ep_port=0x1f90,reg:service.svc=0x7,nw_src=10.244.1.5 actions=load:0x1->reg:service.hairpin,ct(commit,table=@next,zone=5,nat(dst=10.244.1.5:8080),exec(set_field:0x3/0x7->ct_mark))",
		"table=service.dnat, priority=200, tcp,reg:service.ep_ip=0xaf40205,reg:service.ep_port=0x1f90,reg:service.svc=0x7 actions=ct(commit,table=@next,zone=5,nat(dst=10.244.2.5:8080),exec(set_field:0x1/0x7->ct_mark))",
	}
	if d := cmp.Diff(want, strs(fs)); d != "" {
		t.Errorf("port flows (-want +got):\n%s", d)
	}
	wantGroup := "group_id=7,type=select,selection_method=dp_hash," +
		"bucket=weight:100,actions=load:0xaf40105->reg:service.ep_ip,load:0x1f90->reg:service.ep_port,resubmit(,@service.dnat)," +
		"bucket=weight:100,actions=load:0xaf40205->reg:service.ep_ip,load:0x1f90->reg:service.ep_port,resubmit(,@service.dnat)"
	if d := cmp.Diff(wantGroup, g.String()); d != "" {
		t.Errorf("group (-want +got):\n%s", d)
	}
	for _, f := range fs {
		if err := f.Validate(); err != nil {
			t.Errorf("invalid flow %s: %v", f.String(), err)
		}
		if f.Tag != ServiceTag("default/web") {
			t.Errorf("flow %s does not carry the service's tag", f.String())
		}
	}
	if err := g.Validate(); err != nil {
		t.Errorf("invalid group: %v", err)
	}
}

func TestPortWithoutEndpointsRejects(t *testing.T) {
	p := Port{Service: "default/web", Name: "dns", Proto: ProtoUDP, ClusterIP: netip.MustParseAddr("10.96.0.10"), Port: 53, Group: 8}
	fs, g := PortFlows(local, p)
	if g != nil {
		t.Errorf("a port without endpoints got a group: %s", g.String())
	}
	want := []string{"table=service.lb, priority=200, ct_state=+new+trk,udp,nw_dst=10.96.0.10,tp_dst=53 actions=controller(max_len=128,userdata=72.65.6a.65.63.74,meter_id=1)"}
	if d := cmp.Diff(want, strs(fs)); d != "" {
		t.Errorf("reject flows (-want +got):\n%s", d)
	}
}

func TestSCTPPortTranslatedStatelessly(t *testing.T) {
	p := Port{Service: "default/sig", Name: "sctp", Proto: ProtoSCTP, ClusterIP: netip.MustParseAddr("10.96.0.11"), Port: 80, Group: 9,
		Endpoints: []Endpoint{{IP: netip.MustParseAddr("10.244.2.5"), Port: 8080}}}
	fs, _ := PortFlows(local, p)
	want := []string{
		"table=service.lb, priority=200, ct_state=+new+trk,sctp,nw_dst=10.96.0.11,tp_dst=80 actions=load:0x9->reg:service.svc,group:9",
		"table=service.dnat, priority=200, sctp,reg:service.ep_ip=0xaf40205,reg:service.ep_port=0x1f90,reg:service.svc=0x9 actions=ct(commit,table=@next,zone=5,nat(dst=10.244.2.5),exec(set_field:0x1/0x7->ct_mark))",
		"table=service.l4, priority=200, ct_state=-rpl+trk,ct_mark=0x1/0x1,sctp,nw_dst=10.244.2.5,tp_dst=80 actions=set_field:8080->sctp_dst,goto_table:@next",
		"table=service.l4, priority=200, ct_state=+rpl+trk,ct_mark=0x1/0x1,sctp,nw_src=10.96.0.11,tp_src=8080 actions=set_field:80->sctp_src,goto_table:@next",
	}
	if d := cmp.Diff(want, strs(fs)); d != "" {
		t.Errorf("sctp flows (-want +got):\n%s", d)
	}
	for _, f := range fs {
		if err := f.Validate(); err != nil {
			t.Errorf("invalid flow %s: %v", f.String(), err)
		}
	}
}

func TestNodePortClusterSNATs(t *testing.T) {
	p := Port{Service: "default/web", Name: "http@nodeport", Proto: ProtoTCP, ClusterIP: DefaultNodePortIP, Port: 30080, Group: 10, SNAT: true,
		Endpoints: []Endpoint{{IP: netip.MustParseAddr("10.244.2.5"), Port: 8080}}}
	fs, _ := PortFlows(local, p)
	want := []string{
		"table=service.lb, priority=200, ct_state=+new+trk,tcp,nw_dst=169.254.0.252,tp_dst=30080 actions=load:0xa->reg:service.svc,group:10",
		"table=service.dnat, priority=200, tcp,reg:service.ep_ip=0xaf40205,reg:service.ep_port=0x1f90,reg:service.svc=0xa actions=load:0x1->reg:service.snat,ct(commit,table=@next,zone=5,nat(dst=10.244.2.5:8080),exec(set_field:0x5/0x7->ct_mark))",
	}
	if d := cmp.Diff(want, strs(fs)); d != "" {
		t.Errorf("nodeport flows (-want +got):\n%s", d)
	}
}

func TestSessionAffinityLearns(t *testing.T) {
	p := Port{Service: "default/web", Name: "http", Proto: ProtoTCP, ClusterIP: netip.MustParseAddr("10.96.0.10"), Port: 80, Group: 7, Affinity: 30,
		Endpoints: []Endpoint{{IP: netip.MustParseAddr("10.244.2.5"), Port: 8080}}}
	fs, _ := PortFlows(local, p)
	want := []string{
		"table=service.lb, priority=200, ct_state=+new+trk,tcp,nw_dst=10.96.0.10,tp_dst=80 actions=move:NXM_OF_TCP_SRC[]->reg:service.ep_port,load:0x7->reg:service.svc,resubmit(,@service.affinity),goto_table:@service.select",
		"table=service.select, priority=210, reg:service.affinity=0x1,reg:service.svc=0x7 actions=goto_table:@service.dnat",
		"table=service.select, priority=200, reg:service.svc=0x7 actions=group:7",
		"table=service.dnat, priority=100, reg:service.affinity=0x1,reg:service.svc=0x7 actions=load:0x0->reg:service.affinity,group:7",
		"table=service.dnat, priority=200, tcp,reg:service.ep_ip=0xaf40205,reg:service.ep_port=0x1f90,reg:service.svc=0x7 actions=learn(table=@service.affinity,idle_timeout=30,priority=200,eth_type=0x800,nw_proto=6,NXM_OF_IP_SRC[],NXM_OF_IP_DST[],NXM_OF_TCP_DST[],load:reg:service.ep_ip->reg:service.ep_ip,load:reg:service.ep_port->reg:service.ep_port,load:0x1->reg:service.affinity),ct(commit,table=@next,zone=5,nat(dst=10.244.2.5:8080),exec(set_field:0x1/0x7->ct_mark))",
	}
	if d := cmp.Diff(want, strs(fs)); d != "" {
		t.Errorf("affinity flows (-want +got):\n%s", d)
	}
	for _, f := range fs {
		if err := f.Validate(); err != nil {
			t.Errorf("invalid flow %s: %v", f.String(), err)
		}
	}
}

// TestNodePortLocalInClusterClients: with externalTrafficPolicy Local,
// clients inside the cluster (the node's pods, and the node, masqueraded
// to its gateway address) are balanced over the ClusterIP port's group,
// also when the node has no local endpoint; everyone else gets the local
// endpoints, or the reject.
func TestNodePortLocalInClusterClients(t *testing.T) {
	inCluster := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00::/64")}
	for _, c := range []struct {
		name      string
		endpoints []Endpoint
		want      []string
	}{
		{"a local endpoint", []Endpoint{{IP: netip.MustParseAddr("10.244.1.5"), Port: 8080, Local: true}}, []string{
			"table=service.lb, priority=200, ct_state=+new+trk,tcp,nw_dst=169.254.0.252,tp_dst=30080 actions=load:0xa->reg:service.svc,group:10",
			"table=service.lb, priority=205, ct_state=+new+trk,tcp,nw_src=10.244.1.0/24,nw_dst=169.254.0.252,tp_dst=30080 actions=load:0x7->reg:service.svc,group:7",
			"table=service.dnat, priority=200, tcp,reg:service.ep_ip=0xaf40105,reg:service.ep_port=0x1f90,reg:service.svc=0xa actions=ct(commit,table=@next,zone=5,nat(dst=10.244.1.5:8080),exec(set_field:0x1/0x7->ct_mark))",
			"table=service.dnat, priority=210, tcp,reg:service.ep_ip=0xaf40105,reg:service.ep_port=0x1f90,reg:service.svc=0xa,nw_src=10.244.1.5 actions=load:0x1->reg:service.hairpin,ct(commit,table=@next,zone=5,nat(dst=10.244.1.5:8080),exec(set_field:0x3/0x7->ct_mark))",
		}},
		{"no local endpoint", nil, []string{
			"table=service.lb, priority=205, ct_state=+new+trk,tcp,nw_src=10.244.1.0/24,nw_dst=169.254.0.252,tp_dst=30080 actions=load:0x7->reg:service.svc,group:7",
			"table=service.lb, priority=200, ct_state=+new+trk,tcp,nw_dst=169.254.0.252,tp_dst=30080 actions=controller(max_len=128,userdata=72.65.6a.65.63.74,meter_id=1)",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Port{Service: "default/web", Name: "http@nodeport", Proto: ProtoTCP, ClusterIP: DefaultNodePortIP, Port: 30080, Group: 10,
				Endpoints: c.endpoints, InCluster: inCluster, InClusterGroup: 7}
			fs, _ := PortFlows(local, p)
			if d := cmp.Diff(c.want, strs(fs)); d != "" {
				t.Errorf("flows (-want +got):\n%s", d)
			}
			for _, f := range fs {
				if err := f.Validate(); err != nil {
					t.Errorf("invalid flow %s: %v", f.String(), err)
				}
				if f.Tag != ServiceTag("default/web") {
					t.Errorf("flow %s does not carry the service's tag", f.String())
				}
			}
		})
	}
}

// TestRemotePodSources: the companion port of a Local address for the
// pods of other nodes balances only their new connections (one flow per
// IPv4 prefix, above the address's own port) over every endpoint,
// SNATed; without endpoints it adds nothing, so they fall to the
// address's own port (its reject, or its local endpoints).
func TestRemotePodSources(t *testing.T) {
	sources := []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("10.244.3.0/24"), netip.MustParsePrefix("fd00:2::/64")}
	p := Port{Service: "default/web", Name: "http@nodeport@remote-pods", Proto: ProtoTCP, ClusterIP: DefaultNodePortIP, Port: 30080, Group: 11, SNAT: true,
		Endpoints: []Endpoint{{IP: netip.MustParseAddr("10.244.2.5"), Port: 8080}}, Sources: sources}
	want := []string{
		"table=service.lb, priority=205, ct_state=+new+trk,tcp,nw_src=10.244.2.0/24,nw_dst=169.254.0.252,tp_dst=30080 actions=load:0xb->reg:service.svc,group:11",
		"table=service.lb, priority=205, ct_state=+new+trk,tcp,nw_src=10.244.3.0/24,nw_dst=169.254.0.252,tp_dst=30080 actions=load:0xb->reg:service.svc,group:11",
		"table=service.dnat, priority=200, tcp,reg:service.ep_ip=0xaf40205,reg:service.ep_port=0x1f90,reg:service.svc=0xb actions=load:0x1->reg:service.snat,ct(commit,table=@next,zone=5,nat(dst=10.244.2.5:8080),exec(set_field:0x5/0x7->ct_mark))",
	}
	fs, g := PortFlows(local, p)
	if d := cmp.Diff(want, strs(fs)); d != "" {
		t.Errorf("flows (-want +got):\n%s", d)
	}
	if g == nil || len(g.Buckets) != 1 {
		t.Errorf("group %v, want one bucket", g)
	}
	p.Endpoints = nil
	if fs, g := PortFlows(local, p); len(fs) != 0 || g != nil {
		t.Errorf("without endpoints: %v, %v; want nothing", strs(fs), g)
	}
}
