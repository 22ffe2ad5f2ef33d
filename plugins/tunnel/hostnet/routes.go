package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Route is a route to a peer's pod CIDR through its gateway IP.
type Route struct {
	Dst netip.Prefix
	Via netip.Addr
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Masked().Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Gateway waits for the gateway device podnet creates and returns it.
func Gateway(name string, wait time.Duration) (netlink.Link, error) {
	deadline := time.Now().Add(wait)
	for {
		l, err := netlink.LinkByName(name)
		if err == nil {
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("gateway device %q not found after %s (is podnet enabled before tunnel, with the same gateway name?): %w", name, wait, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// AddRoute installs (or replaces) r on the gateway device, on-link: the
// next hop is a peer gateway the switch answers for. For IPv6 the next
// hop gets a permanent neighbour entry at mac, as the switch answers ARP
// only.
func AddRoute(gw netlink.Link, r Route, mac net.HardwareAddr) error {
	if r.Via.Is6() {
		n := &netlink.Neigh{LinkIndex: gw.Attrs().Index, Family: netlink.FAMILY_V6, State: netlink.NUD_PERMANENT,
			IP: net.IP(r.Via.AsSlice()), HardwareAddr: mac}
		if err := netlink.NeighSet(n); err != nil {
			return fmt.Errorf("neighbour %s at %s on %s: %w", r.Via, mac, gw.Attrs().Name, err)
		}
	}
	nr := &netlink.Route{LinkIndex: gw.Attrs().Index, Dst: ipnet(r.Dst), Gw: net.IP(r.Via.AsSlice()), Flags: int(netlink.FLAG_ONLINK)}
	if err := netlink.RouteReplace(nr); err != nil {
		return fmt.Errorf("route %s via %s dev %s: %w", r.Dst, r.Via, gw.Attrs().Name, err)
	}
	return nil
}

// DelRoute removes r (and the IPv6 neighbour entry); a route that is gone
// already is not an error.
func DelRoute(gw netlink.Link, r Route) error {
	nr := &netlink.Route{LinkIndex: gw.Attrs().Index, Dst: ipnet(r.Dst), Gw: net.IP(r.Via.AsSlice())}
	if err := netlink.RouteDel(nr); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("deleting route %s via %s: %w", r.Dst, r.Via, err)
	}
	if r.Via.Is6() {
		n := &netlink.Neigh{LinkIndex: gw.Attrs().Index, Family: netlink.FAMILY_V6, IP: net.IP(r.Via.AsSlice())}
		if err := netlink.NeighDel(n); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("deleting neighbour %s: %w", r.Via, err)
		}
	}
	return nil
}

// EnableForwarding turns on IPv4 and IPv6 forwarding in the node's
// namespace: pods reach other nodes and the outside through the node.
func EnableForwarding() error {
	for _, p := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 && b[0] == '1' {
			continue
		}
		if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("enabling forwarding (%s): %w", p, err)
		}
	}
	return nil
}

// Resolve asks the kernel to resolve ip's MAC on the uplink now (a
// neighbour update with NTF_USE, which sends the ARP request without any
// packet waiting). ovs-vswitchd learns the answer from the reply it
// forwards on the underlay bridge, so the first packet into the tunnel
// towards that peer finds its tunnel neighbour entry instead of being
// dropped while ovs-vswitchd asks itself.
func Resolve(uplink string, ip netip.Addr) error {
	l, err := netlink.LinkByName(uplink)
	if err != nil {
		return fmt.Errorf("uplink %q: %w", uplink, err)
	}
	fam := netlink.FAMILY_V4
	if ip.Is6() {
		fam = netlink.FAMILY_V6
	}
	n := &netlink.Neigh{LinkIndex: l.Attrs().Index, Family: fam, IP: net.IP(ip.AsSlice()), Flags: netlink.NTF_USE}
	if err := netlink.NeighSet(n); err != nil {
		return fmt.Errorf("resolving %s on %s: %w", ip, uplink, err)
	}
	return nil
}
