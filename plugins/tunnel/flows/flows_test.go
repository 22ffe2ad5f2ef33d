package flows

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/sdk/flow"
)

func mac(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }

var local = Local{TunnelPort: 3, GatewayMAC: mac("0a:58:0a:f4:01:01"), GatewayIPv4: netip.MustParseAddr("10.244.1.1")}

func strs(fs []flow.Flow) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
		if err := f.Validate(); err != nil {
			out = append(out, "INVALID: "+err.Error())
		}
	}
	return out
}

func TestStaticFlows(t *testing.T) {
	want := []string{
		"table=podnet.classifier, priority=200, ip,in_port=3 actions=load:0x3->reg:sdk.pkt_source,set_field:0a:58:0a:f4:01:01->eth_dst,goto_table:@stage:ip/ConntrackState",
		"table=podnet.classifier, priority=200, ipv6,in_port=3 actions=load:0x3->reg:sdk.pkt_source,set_field:0a:58:0a:f4:01:01->eth_dst,goto_table:@stage:ip/ConntrackState",
		"table=podnet.l2_forward, priority=200, dl_dst=0a:58:ff:ff:ff:fe actions=load:0x3->reg:sdk.target_ofport,load:0x1->reg:sdk.output_ready,goto_table:@next",
	}
	if d := cmp.Diff(want, strs(StaticFlows(local))); d != "" {
		t.Errorf("static flows (-want +got):\n%s", d)
	}
}

func TestPeerFlowsDualStack(t *testing.T) {
	p := Peer{Name: "node-2", IP: netip.MustParseAddr("198.18.0.2"),
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("fd00:10:244:2::/64")}}
	want := []string{
		"table=tunnel.l3_forward, priority=200, ip,nw_dst=10.244.2.0/24 actions=set_field:0a:58:0a:f4:01:01->eth_src,set_field:0a:58:ff:ff:ff:fe->eth_dst,set_field:198.18.0.2->tun_dst,dec_ttl,goto_table:@next",
		// The node's ARP for the peer gateway, answered in place.
		"table=podnet.arp_forward, priority=150, arp,reg:sdk.pkt_source=0x2,arp_tpa=10.244.2.1,arp_op=1 actions=set_field:0a:58:0a:f4:01:01->eth_dst,set_field:0a:58:ff:ff:ff:fe->eth_src,set_field:2->arp_op,set_field:0a:58:0a:f4:01:01->arp_tha,set_field:10.244.1.1->arp_tpa,set_field:0a:58:ff:ff:ff:fe->arp_sha,set_field:10.244.2.1->arp_spa,IN_PORT",
		// IPv6 pod CIDRs ride the same IPv4 underlay.
		"table=tunnel.l3_forward, priority=200, ipv6,ipv6_dst=fd00:10:244:2::/64 actions=set_field:0a:58:0a:f4:01:01->eth_src,set_field:0a:58:ff:ff:ff:fe->eth_dst,set_field:198.18.0.2->tun_dst,dec_ttl,goto_table:@next",
	}
	fs := PeerFlows(local, p)
	if d := cmp.Diff(want, strs(fs)); d != "" {
		t.Errorf("peer flows (-want +got):\n%s", d)
	}
	for _, f := range fs {
		if f.Tag != PeerTag("node-2") {
			t.Errorf("%s: tag %#x, want the peer's %#x", f.String(), f.Tag, PeerTag("node-2"))
		}
	}
}

func TestGatewayIP(t *testing.T) {
	for in, want := range map[string]string{"10.244.2.0/24": "10.244.2.1", "10.244.2.7/24": "10.244.2.1", "fd00:10:244:2::/64": "fd00:10:244:2::1"} {
		if got := GatewayIP(netip.MustParsePrefix(in)); got.String() != want {
			t.Errorf("GatewayIP(%s) = %s, want %s", in, got, want)
		}
	}
}
