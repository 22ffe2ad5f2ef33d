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

// RouteProtocol marks every route this package adds (the routing
// protocol field, "proto 89" in ip route), so the plugin finds its own
// routes again after a restart, whatever next hop or family they were
// made with, and no one else's.
const RouteProtocol netlink.RouteProtocol = 89

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
		if err := AddRoute(gw, hop, c); err != nil {
			return err
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
	// Only a neighbour that is there: a node without IPv6 cannot even
	// be asked to delete an IPv6 one.
	ns, err := netlink.NeighList(gw.Attrs().Index, family(hop))
	if err != nil {
		return errors.Join(errs...)
	}
	for _, n := range ns {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == hop {
			if err := netlink.NeighDel(&n); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("deleting neighbour %s: %w", hop, err))
			}
		}
	}
	return errors.Join(errs...)
}

// AddRoute routes one prefix via hop on the gateway device (Install set
// the neighbour).
func AddRoute(gw netlink.Link, hop netip.Addr, p netip.Prefix) error {
	r := &netlink.Route{LinkIndex: gw.Attrs().Index, Dst: ipnet(p), Gw: net.IP(hop.AsSlice()), Flags: int(netlink.FLAG_ONLINK),
		Protocol: RouteProtocol}
	if err := netlink.RouteReplace(r); err != nil {
		return fmt.Errorf("route %s via %s dev %s: %w", p, hop, gw.Attrs().Name, err)
	}
	return nil
}

// DelRoute removes the route to p that AddRoute made, via whichever next
// hop (an earlier configuration's too); a missing one is not an error.
func DelRoute(gw netlink.Link, p netip.Prefix) error {
	r := &netlink.Route{LinkIndex: gw.Attrs().Index, Dst: ipnet(p), Protocol: RouteProtocol}
	if err := netlink.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("deleting route %s dev %s: %w", p, gw.Attrs().Name, err)
	}
	return nil
}

// Owned lists the routes on the gateway device that this package added
// (RouteProtocol), of both families, by destination.
func Owned(gw netlink.Link) (map[netip.Prefix]netlink.Route, error) {
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: gw.Attrs().Index, Protocol: RouteProtocol},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return nil, fmt.Errorf("listing the routes on %s: %w", gw.Attrs().Name, err)
	}
	out := map[netip.Prefix]netlink.Route{}
	for _, r := range rs {
		if r.Dst == nil {
			continue
		}
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		out[netip.PrefixFrom(a.Unmap(), ones)] = r
	}
	return out, nil
}

// DelOwned removes one route Owned listed; a missing one is not an error.
func DelOwned(r netlink.Route) error {
	if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("deleting route %s via %s: %w", r.Dst, r.Gw, err)
	}
	return nil
}
