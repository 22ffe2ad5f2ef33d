package flows

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/sdk/flow"
)

func mac(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }

var (
	gw = Endpoint{OFPort: 1, MAC: mac("0a:58:0a:f4:01:01"),
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("fd00::1")}}
	pod = Endpoint{OFPort: 5, MAC: mac("0a:58:0a:f4:01:05"), IPs: []netip.Addr{netip.MustParseAddr("10.244.1.5")}}
)

func strs(fs []flow.Flow) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

func TestPodFlowsIPv4(t *testing.T) {
	want := []string{
		"table=podnet.arp_guard, priority=200, arp,in_port=5,dl_src=0a:58:0a:f4:01:05,arp_spa=10.244.1.5,arp_sha=0a:58:0a:f4:01:05 actions=goto_table:@next",
		"table=podnet.ip_guard, priority=200, ip,in_port=5,dl_src=0a:58:0a:f4:01:05,nw_src=10.244.1.5 actions=goto_table:@next",
		// The ARP responder for the gateway: request in, reply back out of in_port.
		"table=podnet.arp_forward, priority=220, arp,in_port=5,arp_tpa=10.244.1.1,arp_op=1 actions=set_field:0a:58:0a:f4:01:05->eth_dst,set_field:0a:58:0a:f4:01:01->eth_src,set_field:2->arp_op,set_field:0a:58:0a:f4:01:05->arp_tha,set_field:10.244.1.5->arp_tpa,set_field:0a:58:0a:f4:01:01->arp_sha,set_field:10.244.1.1->arp_spa,IN_PORT",
		"table=podnet.l3_forward, priority=200, ip,dl_dst=0a:58:0a:f4:01:01,nw_dst=10.244.1.5 actions=set_field:0a:58:0a:f4:01:01->eth_src,set_field:0a:58:0a:f4:01:05->eth_dst,dec_ttl,goto_table:@next",
		"table=podnet.l2_forward, priority=200, dl_dst=0a:58:0a:f4:01:05 actions=load:0x5->reg:sdk.target_ofport,load:0x1->reg:sdk.output_ready,goto_table:@next",
	}
	if diff := cmp.Diff(want, strs(PodFlows(gw, pod))); diff != "" {
		t.Errorf("pod flows (-want +got):\n%s", diff)
	}
	for _, f := range PodFlows(gw, pod) {
		if err := f.Validate(); err != nil {
			t.Errorf("invalid flow: %v", err)
		}
		if f.Tag != pod.OFPort {
			t.Errorf("flow %s has tag %d, want the pod's ofport %d", f.String(), f.Tag, pod.OFPort)
		}
	}
}

func TestSpoofGuardMatchesOwnAddressesOnly(t *testing.T) {
	var guards []string
	for _, f := range PodFlows(gw, pod) {
		if f.Table == ARPGuard || f.Table == IPGuard {
			guards = append(guards, f.Match.String())
		}
	}
	want := []string{
		flow.Match{}.InPort(5).ARP().EthSrc(pod.MAC).ARPSha(pod.MAC).ARPSpa(pod.IPs[0]).String(),
		flow.Match{}.InPort(5).IPv4().EthSrc(pod.MAC).IPv4Src(pod.IPs[0]).String(),
	}
	if diff := cmp.Diff(want, guards); diff != "" {
		t.Errorf("guard matches (-want +got):\n%s", diff)
	}
}

func TestDualStackAndNoConflicts(t *testing.T) {
	a := Endpoint{OFPort: 5, MAC: mac("0a:58:0a:f4:01:05"), IPs: []netip.Addr{netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00::5")}}
	b := Endpoint{OFPort: 6, MAC: mac("0a:58:0a:f4:01:06"), IPs: []netip.Addr{netip.MustParseAddr("10.244.1.6"), netip.MustParseAddr("fd00::6")}}
	all := append(append(append(StaticFlows(), GatewayFlows(gw)...), PodFlows(gw, a)...), PodFlows(gw, b)...)
	// As in Antrea: two spoof guards, L3 and L2 delivery, and the
	// gateway's ARP responder for IPv4; a guard for the address, one for
	// link-local neighbour discovery and L3 delivery for IPv6.
	if n := len(PodFlows(gw, pod)); n > 5 {
		t.Errorf("IPv4 pod has %d flows, want at most 5", n)
	}
	if n := len(PodFlows(gw, a)); n > 8 {
		t.Errorf("dual-stack pod has %d flows, want at most 8", n)
	}
	keys := map[flow.Key]string{}
	for _, f := range all {
		if err := f.Validate(); err != nil {
			t.Errorf("invalid flow: %v", err)
		}
		if other, dup := keys[f.Key()]; dup {
			t.Errorf("two flows share key %s:\n  %s\n  %s", f.Key(), other, f.String())
		}
		keys[f.Key()] = f.String()
	}
}

func TestSolicitedNode(t *testing.T) {
	got := SolicitedNode(netip.MustParseAddr("fd00:10:244:1::abcd:1234"))
	if want := netip.MustParseAddr("ff02::1:ffcd:1234"); got != want {
		t.Errorf("SolicitedNode = %s, want %s", got, want)
	}
}
