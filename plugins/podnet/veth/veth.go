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
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Config describes one pod interface.
type Config struct {
	// Netns is the pod's network namespace path.
	Netns string
	// IfName is the name inside the pod, HostIfName the host end's.
	IfName     string
	HostIfName string
	// LowerIfName is set for a pod on a warm pair (Adopt): the pair's
	// lower end, which the pod's interface, a macvlan, sits on.
	LowerIfName string
	MTU         int
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

// Create creates the pair, both ends up: the pod end in the pod netns,
// with its name, MTU and MAC but no addresses (c.Addrs is not read); the
// host end in the host netns, with ARP and IPv6 off. The host end exists
// when it returns, so the caller can attach it to the switch while
// Configure gives the pod end its addresses. On error nothing is left
// behind.
//
// The host end is born with every flag it will ever need, in the request
// that creates the pair, and its carrier comes up (with the pod end)
// before Create returns, so it has changed for the last time before the
// switch attaches it. ovs-vswitchd reacts to each change of a port it has attached by
// asking the kernel for the state of every port on the bridge, and to a
// change of any interface in its namespace by reconfiguring the whole
// bridge: creating the host end down, then turning ARP off, bringing it
// up, letting ovs-vswitchd turn promiscuous mode on and the pod end
// coming up later made five such changes, three of them after the attach.
func Create(c Config) error {
	podNS, err := ns.GetNS(c.Netns)
	if err != nil {
		return fmt.Errorf("opening pod netns %s: %w", c.Netns, err)
	}
	defer podNS.Close()
	if err := addPair(c, int(podNS.Fd()), 0); err != nil {
		if !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("creating veth %s/%s: %w", c.IfName, c.HostIfName, err)
		}
		if _, lerr := netlink.LinkByName(c.HostIfName); lerr == nil {
			return fmt.Errorf("creating veth %s/%s: host interface %s already exists (left over from an earlier pod?): %w", c.IfName, c.HostIfName, c.HostIfName, err)
		}
		return fmt.Errorf("interface %s already exists in pod netns %s", c.IfName, c.Netns)
	}
	// IPv6 off before the pod end is up: without a carrier the kernel has
	// given the host end no IPv6 address yet, and now never will. Then the
	// pod end up, which brings the host end's carrier up.
	err = os.WriteFile("/proc/sys/net/ipv6/conf/"+c.HostIfName+"/disable_ipv6", []byte("1"), 0o644)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		err = fmt.Errorf("turning IPv6 off on host end %s: %w", c.HostIfName, err)
	} else {
		err = podNS.Do(func(ns.NetNS) error {
			link, err := netlink.LinkByName(c.IfName)
			if err == nil {
				err = netlink.LinkSetUp(link)
			}
			if err != nil {
				return fmt.Errorf("setting %s up: %w", c.IfName, err)
			}
			return nil
		})
	}
	if err != nil {
		if terr := Teardown(c.Netns, c.IfName, c.HostIfName); terr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", terr))
		}
		return err
	}
	return nil
}

// hostEndFlags are the host end's flags from birth. Up: it is a switch
// port. NOARP: on the userspace datapath the node's kernel sees the
// port's packets too, and would answer the pod's ARP for the gateway
// address, which the node owns, with the veth's own MAC; which answer the
// pod kept would be a race, and frames to the veth MAC go nowhere in the
// pipeline. PROMISC: ovs-vswitchd sets it when it attaches the port.
const hostEndFlags = unix.IFF_UP | unix.IFF_NOARP | unix.IFF_PROMISC

// addPair sends the one RTM_NEWLINK that creates the pair from the host
// netns: the host end with hostEndFlags, the peer named c.IfName with
// peerFlags and, if set, c.MAC, in the netns peerNSFd names (-1: the host
// netns). The peer cannot be up from birth: the kernel creates it first,
// before it has a peer to carry to. netlink.LinkAdd sets only IFF_UP and a
// few other flags at creation, so the request is built here.
func addPair(c Config, peerNSFd int, peerFlags uint32) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Flags, msg.Change = hostEndFlags, hostEndFlags
	req.AddData(msg)
	req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(c.HostIfName)))
	if c.MTU > 0 {
		req.AddData(nl.NewRtAttr(unix.IFLA_MTU, nl.Uint32Attr(uint32(c.MTU))))
	}
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("veth"))
	peer := info.AddRtAttr(nl.IFLA_INFO_DATA, nil).AddRtAttr(nl.VETH_INFO_PEER, nil)
	pmsg := nl.NewIfInfomsgChild(peer, unix.AF_UNSPEC)
	pmsg.Flags, pmsg.Change = peerFlags, peerFlags
	peer.AddRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(c.IfName))
	if len(c.MAC) > 0 {
		peer.AddRtAttr(unix.IFLA_ADDRESS, []byte(c.MAC))
	}
	if c.MTU > 0 {
		peer.AddRtAttr(unix.IFLA_MTU, nl.Uint32Attr(uint32(c.MTU)))
	}
	if peerNSFd >= 0 {
		peer.AddRtAttr(unix.IFLA_NET_NS_FD, nl.Uint32Attr(uint32(peerNSFd)))
	}
	req.AddData(info)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// Configure gives the pod end of a pair Create made its addresses and
// routes (and turns its transmit checksum offload off if c says so). On
// error the pair is removed.
func Configure(c Config) error {
	podNS, err := ns.GetNS(c.Netns)
	if err == nil {
		err = podNS.Do(func(ns.NetNS) error { return configurePod(c) })
		podNS.Close()
	} else {
		err = fmt.Errorf("opening pod netns %s: %w", c.Netns, err)
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
		want := "veth"
		if c.LowerIfName != "" {
			want = "macvlan"
		}
		if link.Type() != want {
			missing = append(missing, fmt.Sprintf("%s is a %s, not a %s", c.IfName, link.Type(), want))
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
