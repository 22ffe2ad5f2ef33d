package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Gateway waits for the gateway device podnet creates and returns it.
func Gateway(name string, wait time.Duration) (netlink.Link, error) {
	deadline := time.Now().Add(wait)
	for {
		l, err := netlink.LinkByName(name)
		if err == nil {
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("gateway device %q not found after %s (is podnet enabled before service, with the same gateway name?): %w", name, wait, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// family is a's netlink address family.
func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Masked().Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Install sets the neighbour hop at the gateway's MAC and routes every
// CIDR via hop on the gateway device (replacing what was there).
// hop and cidrs are of one family.
func Install(gw netlink.Link, hop netip.Addr, cidrs []netip.Prefix) error {
	n := &netlink.Neigh{LinkIndex: gw.Attrs().Index, Family: family(hop), State: netlink.NUD_PERMANENT,
		IP: net.IP(hop.AsSlice()), HardwareAddr: gw.Attrs().HardwareAddr}
	if err := netlink.NeighSet(n); err != nil {
		return fmt.Errorf("neighbour %s at %s on %s: %w", hop, gw.Attrs().HardwareAddr, gw.Attrs().Name, err)
	}
	for _, c := range cidrs {
		r := &netlink.Route{LinkIndex: gw.Attrs().Index, Dst: ipnet(c), Gw: net.IP(hop.AsSlice()), Flags: int(netlink.FLAG_ONLINK)}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("route %s via %s dev %s: %w", c, hop, gw.Attrs().Name, err)
		}
	}
	return nil
}

// Remove deletes the routes and the neighbour; what is gone already is
// not an error.
func Remove(gw netlink.Link, hop netip.Addr, cidrs []netip.Prefix) error {
	var errs []error
	for _, c := range cidrs {
		r := &netlink.Route{LinkIndex: gw.Attrs().Index, Dst: ipnet(c), Gw: net.IP(hop.AsSlice())}
		if err := netlink.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("deleting route %s via %s: %w", c, hop, err))
		}
	}
	n := &netlink.Neigh{LinkIndex: gw.Attrs().Index, Family: family(hop), IP: net.IP(hop.AsSlice())}
	if err := netlink.NeighDel(n); err != nil && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("deleting neighbour %s: %w", hop, err))
	}
	return errors.Join(errs...)
}

// AddRoute routes one prefix via hop on the gateway device (Install set
// the neighbour).
func AddRoute(gw netlink.Link, hop netip.Addr, p netip.Prefix) error {
	r := &netlink.Route{LinkIndex: gw.Attrs().Index, Dst: ipnet(p), Gw: net.IP(hop.AsSlice()), Flags: int(netlink.FLAG_ONLINK)}
	if err := netlink.RouteReplace(r); err != nil {
		return fmt.Errorf("route %s via %s dev %s: %w", p, hop, gw.Attrs().Name, err)
	}
	return nil
}

// DelRoute removes a route AddRoute made; a missing one is not an error.
func DelRoute(gw netlink.Link, hop netip.Addr, p netip.Prefix) error {
	r := &netlink.Route{LinkIndex: gw.Attrs().Index, Dst: ipnet(p), Gw: net.IP(hop.AsSlice())}
	if err := netlink.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("deleting route %s via %s: %w", p, hop, err)
	}
	return nil
}
