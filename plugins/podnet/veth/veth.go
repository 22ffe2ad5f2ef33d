package veth

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Config describes one pod interface.
type Config struct {
	// Netns is the pod's network namespace path.
	Netns string
	// IfName is the name inside the pod, HostIfName the host end's.
	IfName     string
	HostIfName string
	MTU        int
	// MAC of the pod end; kept stable so neighbours never hold a stale entry.
	MAC net.HardwareAddr
	// Addrs are the pod's addresses; Gateways the gateway per family.
	Addrs    []netip.Addr
	Gateways []netip.Addr
	// NoTxChecksum turns off transmit checksum offload on the pod end; the
	// OVS userspace (netdev) datapath without userspace TSO needs it for
	// TCP and UDP to work.
	NoTxChecksum bool
}

func (c Config) gatewayFor(a netip.Addr) (netip.Addr, bool) {
	for _, g := range c.Gateways {
		if g.Is4() == a.Is4() {
			return g, true
		}
	}
	return netip.Addr{}, false
}

// Setup creates the pair and configures both ends. On error nothing is
// left behind. It returns the host end's MAC.
func Setup(c Config) (net.HardwareAddr, error) {
	if err := Create(c); err != nil {
		return nil, err
	}
	if err := Configure(c); err != nil {
		return nil, err
	}
	link, err := netlink.LinkByName(c.HostIfName)
	if err != nil {
		return nil, err
	}
	return link.Attrs().HardwareAddr, nil
}

// Create creates the pair: the pod end in the pod netns, named and sized
// but without addresses or MAC (c.Addrs and c.MAC are not read), and the
// host end in the host netns, down. The host end exists when it returns,
// so the caller can attach it to the switch while it works out the
// addresses and calls Configure. On error nothing is left behind.
func Create(c Config) error {
	podNS, err := ns.GetNS(c.Netns)
	if err != nil {
		return fmt.Errorf("opening pod netns %s: %w", c.Netns, err)
	}
	defer podNS.Close()
	return podNS.Do(func(hostNS ns.NetNS) error {
		if _, err := netlink.LinkByName(c.IfName); err == nil {
			return fmt.Errorf("interface %s already exists in pod netns %s", c.IfName, c.Netns)
		}
		la := netlink.NewLinkAttrs()
		la.Name, la.MTU = c.IfName, c.MTU
		v := &netlink.Veth{LinkAttrs: la, PeerName: c.HostIfName, PeerNamespace: netlink.NsFd(int(hostNS.Fd()))}
		if err := netlink.LinkAdd(v); err != nil {
			if errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("creating veth %s/%s: host interface %s already exists (left over from an earlier pod?): %w", c.IfName, c.HostIfName, c.HostIfName, err)
			}
			return fmt.Errorf("creating veth %s/%s: %w", c.IfName, c.HostIfName, err)
		}
		return nil
	})
}

// Configure gives the pod end of a pair Create made its MAC, addresses
// and routes, and brings both ends up. On error the pair is removed.
func Configure(c Config) error {
	podNS, err := ns.GetNS(c.Netns)
	if err == nil {
		err = podNS.Do(func(ns.NetNS) error { return configurePod(c) })
		podNS.Close()
	} else {
		err = fmt.Errorf("opening pod netns %s: %w", c.Netns, err)
	}
	if err == nil {
		err = hostUp(c)
	}
	if err != nil {
		if terr := Teardown(c.Netns, c.IfName, c.HostIfName); terr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", terr))
		}
		return err
	}
	return nil
}

func configurePod(c Config) error {
	link, err := netlink.LinkByName(c.IfName)
	if err != nil {
		return err
	}
	if len(c.MAC) > 0 {
		if err := netlink.LinkSetHardwareAddr(link, c.MAC); err != nil {
			return fmt.Errorf("setting MAC %s on %s: %w", c.MAC, c.IfName, err)
		}
	}
	if c.NoTxChecksum {
		if err := disableTxChecksum(c.IfName); err != nil {
			return err
		}
	}
	for _, a := range c.Addrs {
		addr := &netlink.Addr{IPNet: hostNet(a)}
		if a.Is6() {
			// The switch guarantees uniqueness; DAD would only delay the pod.
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := netlink.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("adding %s to %s: %w", a, c.IfName, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting %s up: %w", c.IfName, err)
	}
	for _, a := range c.Addrs {
		gw, ok := c.gatewayFor(a)
		if !ok {
			continue
		}
		for _, r := range podRoutes(link.Attrs().Index, a, gw) {
			if err := netlink.RouteAdd(&r); err != nil {
				return fmt.Errorf("adding route %s in pod: %w", r.String(), err)
			}
		}
	}
	return nil
}

// podRoutes are the routes a pod needs: the gateway on-link, and the
// default route through it.
func podRoutes(ifindex int, a, gw netip.Addr) []netlink.Route {
	def := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if a.Is6() {
		def = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	return []netlink.Route{
		{LinkIndex: ifindex, Dst: hostNet(gw), Scope: netlink.SCOPE_LINK},
		{LinkIndex: ifindex, Dst: prefixNet(def), Gw: net.IP(gw.AsSlice())},
	}
}

func hostUp(c Config) error {
	link, err := netlink.LinkByName(c.HostIfName)
	if err != nil {
		return fmt.Errorf("host end %s: %w", c.HostIfName, err)
	}
	// The host end is a switch port, but on the userspace datapath the
	// node's kernel sees its packets too, and would answer the pod's ARP
	// (and neighbour solicitations) for the gateway address, which the node
	// owns, with the veth's own MAC. Which answer the pod keeps would then
	// be a race, and frames to the veth MAC go nowhere in the pipeline. So
	// the kernel is told to stay out of address resolution on it.
	if err := netlink.LinkSetARPOff(link); err != nil {
		return fmt.Errorf("turning ARP off on host end %s: %w", c.HostIfName, err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+c.HostIfName+"/disable_ipv6", []byte("1"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("turning IPv6 off on host end %s: %w", c.HostIfName, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting host end %s up: %w", c.HostIfName, err)
	}
	return nil
}

// Teardown removes the pair. Removing a pair that is gone, or whose netns
// is gone, is not an error.
func Teardown(netnsPath, ifName, hostIfName string) error {
	if link, err := netlink.LinkByName(hostIfName); err == nil {
		// Deleting one end deletes both.
		if err := netlink.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("deleting host end %s: %w", hostIfName, err)
		}
		return nil
	}
	if netnsPath == "" {
		return nil
	}
	podNS, err := ns.GetNS(netnsPath)
	if err != nil {
		var nsErr ns.NSPathNotExistErr
		if errors.As(err, &nsErr) || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		var notNS ns.NSPathNotNSErr
		if errors.As(err, &notNS) {
			return nil
		}
		return fmt.Errorf("opening pod netns %s: %w", netnsPath, err)
	}
	defer podNS.Close()
	return podNS.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(ifName)
		if err != nil {
			return nil
		}
		if err := netlink.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("deleting %s in pod: %w", ifName, err)
		}
		return nil
	})
}

// Check reports, one line each, what differs from c. An empty list means
// the interface is as Setup left it.
func Check(c Config) []string {
	var missing []string
	if link, err := netlink.LinkByName(c.HostIfName); err != nil {
		missing = append(missing, fmt.Sprintf("host end %s does not exist", c.HostIfName))
	} else if link.Attrs().OperState == netlink.OperDown || link.Attrs().Flags&net.FlagUp == 0 {
		missing = append(missing, fmt.Sprintf("host end %s is down", c.HostIfName))
	}
	podNS, err := ns.GetNS(c.Netns)
	if err != nil {
		return append(missing, fmt.Sprintf("pod netns %s cannot be opened: %v", c.Netns, err))
	}
	defer podNS.Close()
	err = podNS.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(c.IfName)
		if err != nil {
			missing = append(missing, fmt.Sprintf("interface %s does not exist in the pod", c.IfName))
			return nil
		}
		at := link.Attrs()
		if link.Type() != "veth" {
			missing = append(missing, fmt.Sprintf("%s is a %s, not a veth", c.IfName, link.Type()))
		}
		if c.MAC != nil && at.HardwareAddr.String() != c.MAC.String() {
			missing = append(missing, fmt.Sprintf("%s has MAC %s, want %s", c.IfName, at.HardwareAddr, c.MAC))
		}
		if c.MTU != 0 && at.MTU != c.MTU {
			missing = append(missing, fmt.Sprintf("%s has MTU %d, want %d", c.IfName, at.MTU, c.MTU))
		}
		if at.Flags&net.FlagUp == 0 {
			missing = append(missing, fmt.Sprintf("%s is down", c.IfName))
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		var have []netip.Addr
		for _, a := range addrs {
			if ip, ok := netip.AddrFromSlice(a.IP); ok {
				have = append(have, ip.Unmap())
			}
		}
		for _, a := range c.Addrs {
			if !slices.Contains(have, a) {
				missing = append(missing, fmt.Sprintf("%s lacks address %s", c.IfName, a))
			}
		}
		routes, err := netlink.RouteList(link, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, a := range c.Addrs {
			gw, ok := c.gatewayFor(a)
			if !ok {
				continue
			}
			for _, want := range podRoutes(at.Index, a, gw) {
				if !hasRoute(routes, want) {
					missing = append(missing, fmt.Sprintf("pod lacks route %s", describeRoute(want, c.IfName)))
				}
			}
		}
		return nil
	})
	if err != nil {
		missing = append(missing, fmt.Sprintf("inspecting pod netns: %v", err))
	}
	return missing
}

func hasRoute(have []netlink.Route, want netlink.Route) bool {
	for _, r := range have {
		if r.Dst != nil && r.Dst.String() == want.Dst.String() && r.Gw.Equal(want.Gw) {
			return true
		}
		// The kernel reports default routes with a nil or zero Dst.
		if (r.Dst == nil || isZero(r.Dst)) && isZero(want.Dst) && r.Gw.Equal(want.Gw) {
			return true
		}
	}
	return false
}

func isZero(n *net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0 && n.IP.IsUnspecified()
}

func describeRoute(r netlink.Route, dev string) string {
	var b strings.Builder
	b.WriteString(r.Dst.String())
	if r.Gw != nil {
		b.WriteString(" via " + r.Gw.String())
	}
	b.WriteString(" dev " + dev)
	return b.String()
}

func hostNet(a netip.Addr) *net.IPNet {
	return prefixNet(netip.PrefixFrom(a, a.BitLen()))
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
