package feature

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/plugins/egress/hostnet"
	"switchyard.dev/switchyard/sdk"
)

func TestRoutingFor(t *testing.T) {
	ip := netip.MustParseAddr
	sub := Subnet{Prefix: netip.MustParsePrefix("198.18.1.0/24"), Gateway: ip("198.18.1.1")}
	keep := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	grant := sdk.Grant{Kind: sdk.ResourcePktMark, Offset: 8, Width: 8}
	base := Snapshot{Keep: keep, PoolSubnets: map[string]Subnet{"routed": sub},
		Egresses: []EgressView{
			{Name: "web", IPs: []netip.Addr{ip("198.18.1.65")}, Pool: "routed"},
			{Name: "plain", IPs: []netip.Addr{ip("198.18.0.100")}, Pool: "flat"},
			{Name: "elsewhere", IPs: []netip.Addr{ip("198.18.1.66")}, Pool: "routed"},
		}}
	held := map[netip.Addr][]netip.Addr{
		ip("198.18.1.65"):  {ip("10.244.2.5"), ip("10.244.1.5")},
		ip("198.18.0.100"): {ip("10.244.1.6")},
	}
	web := hostnet.RoutedIP{Egress: "web", IP: ip("198.18.1.65"), Subnet: sub.Prefix, Gateway: sub.Gateway, Table: 1103,
		Mark: 3 << 8, MarkMask: 0xff00, Sources: []netip.Addr{ip("10.244.1.5"), ip("10.244.2.5")}}
	for _, tc := range []struct {
		name  string
		s     func(Snapshot) Snapshot
		held  map[netip.Addr][]netip.Addr
		marks map[netip.Addr]uint32
		want  []hostnet.RoutedIP
	}{
		{name: "held IP of a pool with subnetInfo: its table, its mark in the grant, sorted sources",
			held: held, marks: map[netip.Addr]uint32{ip("198.18.1.65"): 3, ip("198.18.0.100"): 1},
			want: []hostnet.RoutedIP{web}},
		{name: "dual-stack Egress, IPv4 subnet: only the IPv4 IP is routed", marks: map[netip.Addr]uint32{ip("198.18.1.65"): 3, ip("fd00:18:1::65"): 4},
			held: map[netip.Addr][]netip.Addr{ip("198.18.1.65"): held[ip("198.18.1.65")], ip("fd00:18:1::65"): {ip("fd00:10:244:1::5")}},
			s: func(s Snapshot) Snapshot {
				s.Egresses = []EgressView{{Name: "web", IPs: []netip.Addr{ip("198.18.1.65"), ip("fd00:18:1::65")}, Pool: "routed"}}
				return s
			},
			want: []hostnet.RoutedIP{web}},
		{name: "nothing held here", held: map[netip.Addr][]netip.Addr{}, marks: map[netip.Addr]uint32{}},
		{name: "held without selected pods: routed all the same",
			held:  map[netip.Addr][]netip.Addr{ip("198.18.1.65"): nil},
			marks: map[netip.Addr]uint32{ip("198.18.1.65"): 1},
			want: []hostnet.RoutedIP{{Egress: "web", IP: ip("198.18.1.65"), Subnet: sub.Prefix, Gateway: sub.Gateway, Table: 1101,
				Mark: 1 << 8, MarkMask: 0xff00}}},
		{name: "no mark (more than 255 held): main table", held: held, marks: map[netip.Addr]uint32{ip("198.18.0.100"): 1}},
		{name: "pool subnetInfo invalid or gone", held: held, marks: map[netip.Addr]uint32{ip("198.18.1.65"): 3},
			s: func(s Snapshot) Snapshot { s.PoolSubnets = nil; return s }},
		{name: "the IP is not in its pool's subnet (a stale status): main table", held: held, marks: map[netip.Addr]uint32{ip("198.18.1.65"): 3},
			s: func(s Snapshot) Snapshot {
				s.PoolSubnets = map[string]Subnet{"routed": {Prefix: netip.MustParsePrefix("198.18.2.0/24"), Gateway: ip("198.18.2.1")}}
				return s
			}},
		{name: "the same IP twice (a stale status): routed once, for the first Egress by name", held: held,
			marks: map[netip.Addr]uint32{ip("198.18.1.65"): 3},
			s: func(s Snapshot) Snapshot {
				s.Egresses = append([]EgressView{{Name: "zz", IPs: []netip.Addr{ip("198.18.1.65")}, Pool: "routed"}}, s.Egresses...)
				return s
			},
			want: []hostnet.RoutedIP{web}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			if tc.s != nil {
				s = tc.s(s)
			}
			got := RoutingFor(s, Plan{Held: tc.held}, tc.marks, grant, 1100, "sy-gw0")
			want := hostnet.Routing{Keep: keep, Gateway: "sy-gw0", TableBase: 1100, IPs: tc.want}
			if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
				cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
