package feature

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/plugins/tunnel/flows"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		in       string
		overhead int
		err      string
	}{
		{in: ``, overhead: 50},
		{in: `{"type":"geneve"}`, overhead: 50},
		{in: `{"type":"vxlan"}`, overhead: 50},
		{in: `{"type":"vxlan","ipv6Underlay":true}`, overhead: 70},
		{in: `{"type":"gre"}`, err: `tunnel config type: "gre" is not an encapsulation this plugin knows; use geneve or vxlan`},
		{in: `{"port":"a-name-far-too-long"}`, err: "longer than 15 characters"},
		{in: `{"type":1}`, err: "tunnel config: json"},
	} {
		c, err := ParseConfig([]byte(tc.in))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case c.Overhead() != tc.overhead:
			t.Errorf("%s: overhead %d, want %d", tc.in, c.Overhead(), tc.overhead)
		}
	}
}

func opsOf(b *flow.Batch) []string {
	var out []string
	for _, o := range b.Ops {
		out = append(out, o.String())
	}
	return out
}

// A node update changes only what differs: a new node IP rewrites the
// routing flows' tun_dst in place and leaves the ARP answer alone; a new
// pod CIDR adds its flows and leaves the old ones; a delete removes every
// flow of the peer in one batch.
func TestNodeChangesOnlyTheDifference(t *testing.T) {
	mac, _ := net.ParseMAC("0a:58:0a:f4:01:01")
	l := flows.Local{TunnelPort: 3, GatewayMAC: mac, GatewayIPv4: netip.MustParseAddr("10.244.1.1")}
	v4 := netip.MustParsePrefix("10.244.2.0/24")
	v6 := netip.MustParsePrefix("fd00:10:244:2::/64")
	p := flows.Peer{Name: "node-2", IP: netip.MustParseAddr("198.18.0.2"), PodCIDRs: []netip.Prefix{v4}}
	moved := p
	moved.IP = netip.MustParseAddr("198.18.0.22")
	dual := p
	dual.PodCIDRs = []netip.Prefix{v4, v6}

	kinds := func(b *flow.Batch) (out []string) {
		for _, o := range b.Ops {
			out = append(out, o.Kind.String()+" "+o.Flow.Table)
		}
		return out
	}
	if d := cmp.Diff([]string{"modify tunnel.l3_forward"}, kinds(diff(flows.PeerFlows(l, p), flows.PeerFlows(l, moved)))); d != "" {
		t.Errorf("node IP change (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"add tunnel.l3_forward"}, kinds(diff(flows.PeerFlows(l, p), flows.PeerFlows(l, dual)))); d != "" {
		t.Errorf("IPv6 CIDR added (-want +got):\n%s", d)
	}
	if b := diff(flows.PeerFlows(l, p), flows.PeerFlows(l, p)); b.Len() != 0 {
		t.Errorf("an unchanged node gives %d operations: %v", b.Len(), opsOf(b))
	}
	if d := cmp.Diff([]string{"delete tunnel.l3_forward", "delete podnet.arp_forward", "delete tunnel.l3_forward"},
		kinds(diff(flows.PeerFlows(l, dual), nil))); d != "" {
		t.Errorf("delete (-want +got):\n%s", d)
	}
}

// FuzzParseConfig: any bytes give a valid config or an error, never a
// panic, and a valid config names a known encapsulation.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{``, `null`, `{"type":"vxlan","ipv6Underlay":true}`, `{"type":"gre"}`, `{"masquerade":false,"port":"x"}`, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if c.Type != "geneve" && c.Type != "vxlan" || c.Port == "" || len(c.Port) > 15 || (c.Overhead() != 50 && c.Overhead() != 70) {
			t.Fatalf("ParseConfig(%q) accepted %+v", b, c)
		}
	})
}

// Pod traffic to another node keeps the pod's address over either family:
// the masquerade keeps every address of every peer, not only the IPv4 one
// the tunnel uses (an IPv6 NodePort or node port saw the node instead).
func TestMasqKeepsEveryNodeAddress(t *testing.T) {
	n2v4, n2v6 := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("fd00:198:18::2")
	peer, ok := peerOf(sdk.NodeInfo{Name: "node-2", NodeIPs: []netip.Addr{n2v6, n2v4},
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("fd00:10:244:2::/64")}})
	if !ok || peer.IP != n2v4 {
		t.Fatalf("peerOf = %+v, %v; want the IPv4 address as the tunnel's", peer, ok)
	}
	facts := sdk.NodeFacts{NodeIPs: []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("fd00:198:18::1")},
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}}
	m := masqOf(facts, "sy-gw0", map[string]flows.Peer{"node-2": peer})
	want := []string{"10.244.1.0/24", "fd00:10:244:1::/64", "198.18.0.1/32", "fd00:198:18::1/128",
		"10.244.2.0/24", "fd00:10:244:2::/64", "198.18.0.2/32", "fd00:198:18::2/128"}
	var got []string
	for _, p := range m.Keep {
		got = append(got, p.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("masquerade exceptions (-want +got):\n%s", diff)
	}
	if moved := peer; samePeer(peer, func() flows.Peer { moved.NodeIPs = moved.NodeIPs[1:]; return moved }()) {
		t.Error("a peer that lost an address counts as unchanged, so its exceptions would not follow")
	}
}
