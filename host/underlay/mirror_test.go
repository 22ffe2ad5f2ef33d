package underlay

import (
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func route(prefix, gw, dev string) Route {
	r := Route{Prefix: netip.MustParsePrefix(prefix), Dev: dev}
	if gw != "" {
		r.Gateway = netip.MustParseAddr(gw)
	}
	return r
}

func TestParseRouteTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    RouteTable
		wantErr string
	}{
		{name: "empty", in: "Route Table:\n"},
		{
			// As ovs-vswitchd 3.1 prints it, with and without system routes.
			name: "user and cached",
			in: "Route Table:\n" +
				"User: 10.99.0.0/24 dev br-phy SRC 10.99.0.1\n" +
				"User: 0.0.0.0/0 dev br-phy GW 10.99.0.254 SRC 10.99.0.1\n" +
				"User: fd00:99::/64 dev br-phy SRC fd00:99::1\n" +
				"Cached: 10.99.0.1/32 dev br-phy SRC 10.99.0.1 local\n" +
				"Cached: 127.0.0.1/32 dev lo SRC 127.0.0.1 local\n",
			want: RouteTable{
				User: []Route{route("10.99.0.0/24", "", "br-phy"), route("0.0.0.0/0", "10.99.0.254", "br-phy"),
					route("fd00:99::/64", "", "br-phy")},
				Cached: []Route{route("10.99.0.1/32", "", "br-phy"), route("127.0.0.1/32", "", "lo")},
			},
		},
		{name: "marked routes are not ours", in: "User: 10.1.0.0/16 MARK 7 dev br-phy SRC 10.1.0.1\n"},
		{name: "not a route", in: "Route Table:\nsomething else\n", wantErr: "line 2"},
		{name: "bad prefix", in: "User: 10.1.0.0/99 dev br-phy SRC 10.1.0.1\n", wantErr: "line 1"},
		{name: "bad gateway", in: "User: 10.1.0.0/16 dev br-phy GW x SRC 10.1.0.1\n", wantErr: "gateway"},
		{name: "no device", in: "User: 10.1.0.0/16 SRC 10.1.0.1\n", wantErr: "names no device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRouteTable(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v\nwant %+v", got, err, tc.want)
			}
		})
	}
}

func FuzzParseRouteTable(f *testing.F) {
	f.Add("Route Table:\nUser: 10.99.0.0/24 dev br-phy SRC 10.99.0.1\nCached: 0.0.0.0/0 dev br-phy GW 10.99.0.254 SRC 10.99.0.1\n")
	f.Add("User: fd00::/64 MARK 1 dev x GW fd00::1 SRC fd00::2 local")
	f.Fuzz(func(t *testing.T, s string) {
		table, err := ParseRouteTable(s)
		if err != nil {
			return
		}
		for _, r := range append(table.User, table.Cached...) {
			if r.Dev == "" || !r.Prefix.IsValid() || r.Prefix != r.Prefix.Masked() {
				t.Fatalf("parsed %q into an incomplete route %+v", s, r)
			}
		}
	})
}

func TestPlanRoutes(t *testing.T) {
	subnet, dflt := route("10.99.0.0/24", "", "br-phy"), route("0.0.0.0/0", "10.99.0.254", "br-phy")
	for _, tc := range []struct {
		name          string
		want, have    []Route
		wantAdd, wDel []Route
	}{
		{name: "in line", want: []Route{subnet, dflt}, have: []Route{dflt, subnet}},
		{name: "a restarted ovs-vswitchd has none", want: []Route{subnet, dflt}, wantAdd: []Route{subnet, dflt}},
		{name: "a gateway changed", want: []Route{subnet, route("0.0.0.0/0", "10.99.0.253", "br-phy")}, have: []Route{subnet, dflt},
			wantAdd: []Route{route("0.0.0.0/0", "10.99.0.253", "br-phy")}},
		{name: "a route went away: the others are given again", want: []Route{subnet}, have: []Route{subnet, dflt},
			wDel: []Route{dflt}, wantAdd: []Route{subnet}},
		{name: "another device's routes are left alone", want: []Route{subnet},
			have: []Route{subnet, route("192.168.5.0/24", "", "br-other")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			del, add := PlanRoutes("br-phy", tc.want, tc.have)
			if !reflect.DeepEqual(add, tc.wantAdd) || !reflect.DeepEqual(del, tc.wDel) {
				t.Fatalf("add %v del %v, want add %v del %v", add, del, tc.wantAdd, tc.wDel)
			}
		})
	}
}

func TestFromKernel(t *testing.T) {
	cidr := func(s string) *net.IPNet { _, n, _ := net.ParseCIDR(s); return n }
	for _, tc := range []struct {
		name string
		in   netlink.Route
		want Route
		ok   bool
	}{
		{name: "connected subnet", in: netlink.Route{Type: unix.RTN_UNICAST, Family: unix.AF_INET, Dst: cidr("10.99.0.0/24")},
			want: route("10.99.0.0/24", "", "br-phy"), ok: true},
		{name: "IPv4 default via a gateway", in: netlink.Route{Type: unix.RTN_UNICAST, Family: unix.AF_INET, Gw: net.ParseIP("10.99.0.254")},
			want: route("0.0.0.0/0", "10.99.0.254", "br-phy"), ok: true},
		{name: "IPv6 default", in: netlink.Route{Type: unix.RTN_UNICAST, Family: unix.AF_INET6, Gw: net.ParseIP("fd00::1")},
			want: route("::/0", "fd00::1", "br-phy"), ok: true},
		{name: "IPv6 link-local", in: netlink.Route{Type: unix.RTN_UNICAST, Family: unix.AF_INET6, Dst: cidr("fe80::/64")}},
		{name: "not unicast", in: netlink.Route{Type: unix.RTN_BLACKHOLE, Family: unix.AF_INET, Dst: cidr("10.5.0.0/16")}},
		{name: "multipath", in: netlink.Route{Type: unix.RTN_UNICAST, Family: unix.AF_INET, Dst: cidr("10.5.0.0/16"),
			MultiPath: []*netlink.NexthopInfo{{Gw: net.ParseIP("10.99.0.2")}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := fromKernel("br-phy", tc.in)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("fromKernel = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestParseNeighbors(t *testing.T) {
	in := "IP                                            MAC                 Bridge\n" +
		"==========================================================================\n" +
		"198.18.0.2                                    0a:58:c6:12:00:02   br-phy\n" +
		"fd00::2                                       0A:58:C6:12:00:03   br-phy STALE\n"
	got, err := ParseNeighbors(in)
	want := []Neighbor{
		{IP: netip.MustParseAddr("198.18.0.2"), MAC: "0a:58:c6:12:00:02", Dev: "br-phy"},
		{IP: netip.MustParseAddr("fd00::2"), MAC: "0a:58:c6:12:00:03", Dev: "br-phy", Stale: true},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{"198.18.0.2 nomac br-phy\n", "x 0a:58:c6:12:00:02 br-phy\n", "198.18.0.2 0a:58:c6:12:00:02 br-phy OLD\n"} {
		if _, err := ParseNeighbors(bad); err == nil {
			t.Errorf("ParseNeighbors(%q) accepted it", bad)
		}
	}
}

func FuzzParseNeighbors(f *testing.F) {
	f.Add("IP  MAC  Bridge\n====\n198.18.0.2   0a:58:c6:12:00:02   br-phy\nfd00::2 0a:58:c6:12:00:03 br-phy STALE\n")
	f.Fuzz(func(t *testing.T, s string) {
		ns, err := ParseNeighbors(s)
		if err != nil {
			return
		}
		for _, n := range ns {
			if !n.IP.IsValid() || n.MAC == "" || n.Dev == "" {
				t.Fatalf("parsed %q into an incomplete neighbour %+v", s, n)
			}
		}
	})
}

func TestUnresolved(t *testing.T) {
	a, b, c := netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.3"), netip.MustParseAddr("198.18.0.4")
	known := map[netip.Addr]bool{a: true, b: true, c: true}
	held := []Neighbor{
		{IP: a, MAC: "0a:58:c6:12:00:02", Dev: "br-phy"},
		{IP: b, MAC: "0a:58:c6:12:00:03", Dev: "br-phy", Stale: true},
		{IP: c, MAC: "0a:58:c6:12:00:04", Dev: "br-int"},
	}
	if got, want := Unresolved("br-phy", known, held), []netip.Addr{b, c}; !reflect.DeepEqual(got, want) {
		t.Errorf("Unresolved = %v, want %v (stale and another bridge's entries do not count)", got, want)
	}
	if got := Unresolved("br-phy", known, nil); len(got) != 3 {
		t.Errorf("a restarted ovs-vswitchd: Unresolved = %v, want all three", got)
	}
}
