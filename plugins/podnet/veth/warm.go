package veth

import (
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// A warm pair is a veth pair made before any pod asks for it, with both
// ends in the host netns: the host end becomes a switch port, the other
// (the lower end) waits. An ADD then creates the pod's interface as a
// macvlan on the lower end, directly inside the pod's netns (Adopt).
//
// Why not move a veth end into the pod instead: moving a device between
// network namespaces waits for an RCU grace period in the kernel, about
// 15 ms on this class of machine, more than creating a new pair and
// attaching it to the switch costs. Creating a device inside another
// namespace does not wait, and the host end, attached long before, sees
// no change at all: ovs-vswitchd does no work for the ADD but install its
// flows.

// LowerName is the lower end's name for warm pair host end name (both
// made by the pool, named "syw…" and "syl…").
func LowerName(host string) string {
	if len(host) > 3 {
		return "syl" + host[3:]
	}
	return "syl" + host
}

// CreateWarm creates a warm pair of the given MTU. Both ends are born
// NOARP and promiscuous (the lower end's promiscuity is what a macvlan on
// it needs, so adding one later changes no flag); IPv6 is turned off on
// both before the lower end comes up, so neither ever gets an address.
// The host end is up from birth. noTxChecksum turns transmit checksum
// offload off on the lower end (see Config.NoTxChecksum): a macvlan cannot
// turn it off itself, and hands the lower end its packets with checksums
// still to fill, which the lower end then fills in software. On error
// nothing is left behind.
func CreateWarm(name string, mtu int, noTxChecksum bool) error {
	lower := LowerName(name)
	// The lower end's promiscuity is what a macvlan on it needs.
	c := Config{IfName: lower, HostIfName: name, MTU: mtu}
	if err := addPair(c, -1, unix.IFF_NOARP|unix.IFF_PROMISC); err != nil {
		return fmt.Errorf("creating warm veth %s/%s: %w", name, lower, err)
	}
	err := func() error {
		for _, dev := range []string{name, lower} {
			err := os.WriteFile("/proc/sys/net/ipv6/conf/"+dev+"/disable_ipv6", []byte("1"), 0o644)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("turning IPv6 off on %s: %w", dev, err)
			}
		}
		if noTxChecksum {
			if err := disableTxChecksum(lower); err != nil {
				return err
			}
		}
		link, err := netlink.LinkByName(lower)
		if err == nil {
			err = netlink.LinkSetUp(link)
		}
		if err != nil {
			return fmt.Errorf("setting warm lower end %s up: %w", lower, err)
		}
		return nil
	}()
	if err != nil {
		if terr := Teardown("", "", name); terr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", terr))
		}
		return err
	}
	return nil
}

// Adopt makes the pod's interface c on warm pair c.HostIfName: a macvlan
// on the pair's lower end (c.LowerIfName), created inside the pod's netns
// with its name, MAC and MTU and up, in one request; then its addresses
// and routes. On error the pair is removed (the macvlan goes with it).
func Adopt(c Config) (err error) {
	defer func() {
		if err != nil {
			if terr := Teardown(c.Netns, c.IfName, c.HostIfName); terr != nil {
				err = errors.Join(err, fmt.Errorf("cleanup: %w", terr))
			}
		}
	}()
	podNS, err := ns.GetNS(c.Netns)
	if err != nil {
		return fmt.Errorf("opening pod netns %s: %w", c.Netns, err)
	}
	defer podNS.Close()
	lower, err := netlink.LinkByName(c.LowerIfName)
	if err != nil {
		return fmt.Errorf("warm lower end %s: %w", c.LowerIfName, err)
	}
	if c.MTU > 0 && lower.Attrs().MTU < c.MTU {
		return fmt.Errorf("warm lower end %s has MTU %d, the pod needs %d", c.LowerIfName, lower.Attrs().MTU, c.MTU)
	}
	if err := addMacvlan(c, lower.Attrs().Index, int(podNS.Fd())); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("interface %s already exists in pod netns %s", c.IfName, c.Netns)
		}
		return fmt.Errorf("creating pod interface %s on %s: %w", c.IfName, c.LowerIfName, err)
	}
	// The lower end fills in the checksums (CreateWarm).
	c.NoTxChecksum = false
	return podNS.Do(func(ns.NetNS) error { return configurePod(c) })
}

// addMacvlan sends the RTM_NEWLINK that creates the pod's macvlan in the
// netns podNSFd names, on lower (an ifindex of this netns), born up.
// Private mode: the lower end carries this one pod only.
func addMacvlan(c Config, lower, podNSFd int) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Flags, msg.Change = unix.IFF_UP, unix.IFF_UP
	req.AddData(msg)
	req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(c.IfName)))
	req.AddData(nl.NewRtAttr(unix.IFLA_LINK, nl.Uint32Attr(uint32(lower))))
	if len(c.MAC) > 0 {
		req.AddData(nl.NewRtAttr(unix.IFLA_ADDRESS, []byte(c.MAC)))
	}
	if c.MTU > 0 {
		req.AddData(nl.NewRtAttr(unix.IFLA_MTU, nl.Uint32Attr(uint32(c.MTU))))
	}
	req.AddData(nl.NewRtAttr(unix.IFLA_NET_NS_FD, nl.Uint32Attr(uint32(podNSFd))))
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("macvlan"))
	info.AddRtAttr(nl.IFLA_INFO_DATA, nil).AddRtAttr(nl.IFLA_MACVLAN_MODE, nl.Uint32Attr(nl.MACVLAN_MODE_PRIVATE))
	req.AddData(info)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}
