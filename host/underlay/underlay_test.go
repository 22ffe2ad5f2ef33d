package underlay

import (
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"

	"switchyard.dev/switchyard/itest/testenv"
)

// addLink adds a veth named name (its peer up too, so it has a carrier):
// this kernel may have no dummy links.
func addLink(t *testing.T, name string) netlink.Link {
	t.Helper()
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
		t.Fatalf("adding %s: %v", name, err)
	}
	for _, n := range []string{name + "p", name} {
		l, err := netlink.LinkByName(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// ipv4 lists the IPv4 addresses on the link named name.
func ipv4(t *testing.T, name string) []string {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	as, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		out = append(out, a.IPNet.String())
	}
	return out
}

// routeDev names the device the route to dst goes out of.
func routeDev(t *testing.T, dst string) string {
	t.Helper()
	rs, err := netlink.RouteGet(net.ParseIP(dst))
	if err != nil || len(rs) == 0 {
		t.Fatalf("route to %s: %v", dst, err)
	}
	l, err := netlink.LinkByIndex(rs[0].LinkIndex)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Name
}

// TestRestoreUndoesTheMove: what Setup moved onto the bridge's interface
// (the node IP and a static route through the node's gateway), Restore
// gives back to the uplink, so the node keeps its IP and routes when the
// uninstall deletes the bridge, also when the bridge's device has lost
// its carrier (its routes then carry the linkdown flag, which the kernel
// refuses in a new route).
func TestRestoreUndoesTheMove(t *testing.T) {
	testenv.InNewNetNS(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	uplink, br := addLink(t, "up0"), addLink(t, "br0")
	addr, _ := netlink.ParseAddr("198.18.0.7/24")
	if err := netlink.AddrAdd(uplink, addr); err != nil {
		t.Fatal(err)
	}
	_, svc, _ := net.ParseCIDR("10.96.0.1/32")
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: uplink.Attrs().Index, Dst: svc, Gw: net.ParseIP("198.18.0.254")}); err != nil {
		t.Fatal(err)
	}

	// Setup's move, without the OVS bridge around it.
	if n, err := move(uplink, br); err != nil || n != 1 {
		t.Fatalf("move to the bridge: %d addresses, %v", n, err)
	}
	if got := ipv4(t, "br0"); !slices.Equal(got, []string{"198.18.0.7/24"}) {
		t.Fatalf("after Setup's move br0 holds %q", got)
	}

	// ovs-vswitchd gone: the bridge's tap device stays, without a
	// carrier, and the kernel marks its routes linkdown.
	peer, err := netlink.LinkByName("br0p")
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetDown(peer); err != nil {
		t.Fatal(err)
	}

	n, err := Restore("br0", "up0", log)
	if err != nil || n != 1 {
		t.Fatalf("Restore: %d addresses, %v; want 1, nil", n, err)
	}
	for _, c := range []struct {
		link string
		want []string
	}{
		{"up0", []string{"198.18.0.7/24"}},
		{"br0", nil},
	} {
		if got := ipv4(t, c.link); !slices.Equal(got, c.want) {
			t.Errorf("after Restore %s holds %q, want %q", c.link, got, c.want)
		}
	}
	for _, dst := range []string{"198.18.0.254", "10.96.0.1"} {
		if dev := routeDev(t, dst); dev != "up0" {
			t.Errorf("after Restore the route to %s goes out of %s, want up0", dst, dev)
		}
	}

	// Nothing left to give back: a second run (or a node whose bridge
	// device is already gone) changes nothing.
	if n, err := Restore("br0", "up0", log); err != nil || n != 0 {
		t.Errorf("second Restore: %d addresses, %v; want 0, nil", n, err)
	}
	if n, err := Restore("br-gone", "up0", log); err != nil || n != 0 {
		t.Errorf("Restore of a missing bridge: %d addresses, %v; want 0, nil", n, err)
	}
}
