package hostnet

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/plugins/internal/nftmatch"
)

var (
	subnet = netip.MustParsePrefix("198.18.1.0/24")
	gw     = netip.MustParseAddr("198.18.1.1")
	keep   = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00::/64")}
)

func routedIP(ip string, id uint32, srcs ...string) RoutedIP {
	r := RoutedIP{Egress: "e-" + ip, IP: netip.MustParseAddr(ip), Subnet: subnet, Gateway: gw, Table: 1100 + int(id),
		Mark: id << 8, MarkMask: 0xff00}
	for _, s := range srcs {
		r.Sources = append(r.Sources, netip.MustParseAddr(s))
	}
	return r
}

func TestRulesAndRoutes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ips        []RoutedIP
		rules      []string
		routes     []string
		markRules  int
		markedSrcs []string
	}{
		{name: "nothing routed"},
		{name: "one IP: a rule, its subnet and default via the gateway",
			ips:   []RoutedIP{routedIP("198.18.1.65", 3, "10.244.1.5", "10.244.2.5")},
			rules: []string{"priority 1100 fwmark 0x300/0xff00 lookup 1103"},
			routes: []string{"table 1103 198.18.1.0/24 dev #7 scope link",
				"table 1103 0.0.0.0/0 via 198.18.1.1 dev #7"},
			// iif, ct direction, one IPv4 keep, two sources
			markRules: 5, markedSrcs: []string{"10.244.1.5", "10.244.2.5"}},
		{name: "two IPs of one subnet: a table each",
			ips: []RoutedIP{routedIP("198.18.1.65", 1, "10.244.1.5"), routedIP("198.18.1.66", 2)},
			rules: []string{"priority 1100 fwmark 0x100/0xff00 lookup 1101",
				"priority 1100 fwmark 0x200/0xff00 lookup 1102"},
			routes: []string{"table 1101 198.18.1.0/24 dev #7 scope link", "table 1101 0.0.0.0/0 via 198.18.1.1 dev #7",
				"table 1102 198.18.1.0/24 dev #7 scope link", "table 1102 0.0.0.0/0 via 198.18.1.1 dev #7"},
			markRules: 4, markedSrcs: []string{"10.244.1.5"}},
		{name: "an IP without pods: routed, nothing to mark",
			ips:    []RoutedIP{routedIP("198.18.1.65", 1)},
			rules:  []string{"priority 1100 fwmark 0x100/0xff00 lookup 1101"},
			routes: []string{"table 1101 198.18.1.0/24 dev #7 scope link", "table 1101 0.0.0.0/0 via 198.18.1.1 dev #7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Routing{Keep: keep, Gateway: "sy-gw0", TableBase: 1100, IPs: tc.ips}
			var rules, routes []string
			for _, x := range r.Rules() {
				rules = append(rules, RuleKey(x))
			}
			for _, x := range r.Routes(7) {
				routes = append(routes, RouteKey(x))
			}
			if d := cmp.Diff(tc.rules, rules); d != "" {
				t.Errorf("rules (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.routes, routes); d != "" {
				t.Errorf("routes (-want +got):\n%s", d)
			}
			mr := markRules(r)
			if len(mr) != tc.markRules {
				t.Errorf("%d mark rules, want %d", len(mr), tc.markRules)
			}
			var srcs []string
			for _, x := range mr {
				if p, ok := x[0].(*expr.Payload); ok && p.Offset == 12 {
					srcs = append(srcs, net.IP(x[2].(*expr.Cmp).Data).String())
				}
			}
			if d := cmp.Diff(tc.markedSrcs, srcs); d != "" {
				t.Errorf("marked sources (-want +got):\n%s", d)
			}
		})
	}
}

// TestMarkRules pins the prerouting chain's expressions: only from the
// gateway, original direction, kept destinations return, and the mark
// set keeps the bits outside the grant.
func TestMarkRules(t *testing.T) {
	r := Routing{Keep: keep[:1], Gateway: "sy-gw0", TableBase: 1100, IPs: []RoutedIP{routedIP("198.18.1.65", 3, "10.244.1.5")}}
	ret := &expr.Verdict{Kind: expr.VerdictReturn}
	want := [][]expr.Any{
		{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: nftmatch.IfName("sy-gw0")}, ret},
		{&expr.Ct{Key: expr.CtKeyDIRECTION, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{1}}, ret},
		{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 255, 0, 0}, Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{10, 244, 0, 0}},
			ret,
		},
		{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 255, 255, 255}, Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{10, 244, 1, 5}},
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			// mark & ^0xff00 ^ 0x300, little-endian as nftables holds meta mark.
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{0xff, 0x00, 0xff, 0xff}, Xor: []byte{0x00, 0x03, 0x00, 0x00}},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
		},
	}
	if d := cmp.Diff(want, markRules(r)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestOwnTable(t *testing.T) {
	for _, tc := range []struct {
		base, table int
		want        bool
	}{
		{1100, 1100, false}, {1100, 1101, true}, {1100, 1355, true}, {1100, 1356, false},
		{1100, 254, false},
		// A base too low never owns the kernel's tables.
		{0, 254, false}, {100, 254, false},
	} {
		if got := ownTable(tc.base, tc.table); got != tc.want {
			t.Errorf("ownTable(%d, %d) = %v, want %v", tc.base, tc.table, got, tc.want)
		}
	}
}

// TestApplyRoutesInNetNS runs ApplyRoutes, ApplyRouteMarks and
// RemoveRoutes against a real kernel: a crashed incarnation's rule and
// route are swept, others' rules and tables are left alone.
func TestApplyRoutesInNetNS(t *testing.T) {
	testenv.InNewNetNS(t)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "up0"}, PeerName: "up0p"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"up0", "up0p", "lo"} {
		l, _ := netlink.LinkByName(n)
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	up, _ := netlink.LinkByName("up0")
	if err := netlink.AddrAdd(up, &netlink.Addr{IPNet: ipnet(netip.MustParsePrefix("198.18.0.1/24"))}); err != nil {
		t.Fatal(err)
	}
	// Leftovers of a previous incarnation (table 1107), and others' (a
	// rule at another priority, a table outside the range).
	mask := uint32(0xff00)
	rule := func(prio, table int, mark uint32) *netlink.Rule {
		r := netlink.NewRule()
		r.Family, r.Priority, r.Table, r.Mark, r.Mask = netlink.FAMILY_V4, prio, table, mark, &mask
		return r
	}
	for _, r := range []*netlink.Rule{rule(RulePriority, 1107, 0x700), rule(RulePriority, 50, 0x900), rule(2000, 1108, 0x800)} {
		if err := netlink.RuleAdd(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range []int{1107, 50} {
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: up.Attrs().Index, Table: table, Scope: netlink.SCOPE_LINK,
			Dst: ipnet(netip.MustParsePrefix("192.0.2.0/24"))}); err != nil {
			t.Fatal(err)
		}
	}
	r := Routing{Keep: keep, Gateway: "sy-gw0", TableBase: 1100, IPs: []RoutedIP{routedIP("198.18.1.65", 3, "10.244.1.5")}}
	if err := ApplyRoutes(r, up); err != nil {
		t.Fatal(err)
	}
	if err := ApplyRoutes(r, up); err != nil {
		t.Fatalf("a second pass: %v", err)
	}
	if err := ApplyRouteMarks(r); err != nil {
		t.Fatal(err)
	}
	state := func() (rules, routes []string, marks bool) {
		rs, err := netlink.RuleList(netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range rs {
			if x.Mark != 0 {
				rules = append(rules, RuleKey(x))
			}
		}
		rts, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{}, netlink.RT_FILTER_TABLE)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range rts {
			if x.Table != unix.RT_TABLE_LOCAL && x.Table != unix.RT_TABLE_MAIN {
				x.LinkIndex = 7 // the keys below name the uplink #7
				routes = append(routes, RouteKey(x))
			}
		}
		c, err := nftables.New()
		if err != nil {
			t.Fatal(err)
		}
		ts, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range ts {
			marks = marks || tb.Name == RouteTableName
		}
		slices.Sort(rules)
		slices.Sort(routes)
		return rules, routes, marks
	}
	rules, routes, marks := state()
	wantRules := []string{"priority 1100 fwmark 0x300/0xff00 lookup 1103", "priority 1100 fwmark 0x900/0xff00 lookup 50",
		"priority 2000 fwmark 0x800/0xff00 lookup 1108"}
	wantRoutes := []string{"table 1103 0.0.0.0/0 via 198.18.1.1 dev #7", "table 1103 198.18.1.0/24 dev #7 scope link",
		"table 50 192.0.2.0/24 dev #7 scope link"}
	if d := cmp.Diff(wantRules, rules); d != "" {
		t.Errorf("rules after apply (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantRoutes, routes); d != "" {
		t.Errorf("routes after apply (-want +got):\n%s", d)
	}
	if !marks {
		t.Errorf("no nftables table %s after ApplyRouteMarks", RouteTableName)
	}
	// The kernel picks the table for a marked packet from a pod.
	got, err := netlink.RouteGetWithOptions(net.ParseIP("203.0.113.10"), &netlink.RouteGetOptions{Mark: 0x3ff, SrcAddr: net.ParseIP("198.18.0.1")})
	if err != nil || len(got) != 1 || !got[0].Gw.Equal(net.ParseIP("198.18.1.1")) {
		t.Errorf("route to 203.0.113.10 with mark 0x3ff: %+v %v, want via 198.18.1.1", got, err)
	}

	if err := RemoveRoutes(1100); err != nil {
		t.Fatal(err)
	}
	rules, routes, marks = state()
	if d := cmp.Diff(wantRules[1:], rules); d != "" {
		t.Errorf("rules after remove (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantRoutes[2:], routes); d != "" {
		t.Errorf("routes after remove (-want +got):\n%s", d)
	}
	if marks {
		t.Errorf("nftables table %s left after RemoveRoutes", RouteTableName)
	}
	if err := RemoveRoutes(1100); err != nil {
		t.Errorf("removing again: %v", err)
	}
}
