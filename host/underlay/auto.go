package underlay

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/vishvananda/netlink"
)

// Link is what uplink detection reads of a network interface.
type Link struct {
	Name  string
	MAC   string
	Addrs []netip.Addr
}

// DetectUplink finds the uplink for underlay.interface auto: the interface
// that holds nodeIP. When an earlier Setup already moved the node IP onto
// the bridge, the bridge holds it; the uplink is then the interface whose
// MAC the bridge took (Setup gives the bridge the uplink's MAC), so an
// agent restart finds the same uplink.
func DetectUplink(bridge string, nodeIP netip.Addr) (string, error) {
	ls, err := netlink.LinkList()
	if err != nil {
		return "", fmt.Errorf("underlay: listing interfaces: %w", err)
	}
	var links []Link
	for _, l := range ls {
		a := l.Attrs()
		lk := Link{Name: a.Name, MAC: a.HardwareAddr.String()}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return "", fmt.Errorf("underlay: listing addresses of %s: %w", a.Name, err)
		}
		for _, ad := range addrs {
			if ip, ok := netip.AddrFromSlice(ad.IP); ok {
				lk.Addrs = append(lk.Addrs, ip.Unmap())
			}
		}
		links = append(links, lk)
	}
	return pickUplink(bridge, nodeIP, links)
}

// pickUplink is DetectUplink's decision, apart from netlink.
func pickUplink(bridge string, nodeIP netip.Addr, links []Link) (string, error) {
	var holder *Link
	for i := range links {
		for _, a := range links[i].Addrs {
			if a == nodeIP {
				holder = &links[i]
			}
		}
	}
	switch {
	case holder == nil:
		return "", fmt.Errorf("underlay: no interface holds the node IP %s (underlay.interface auto); name the uplink in underlay.interface", nodeIP)
	case holder.Name != bridge:
		return holder.Name, nil
	}
	// Moved already: the uplink is the one interface with the bridge's MAC.
	var same []string
	for _, l := range links {
		if l.Name != bridge && l.MAC == holder.MAC && l.MAC != "" {
			same = append(same, l.Name)
		}
	}
	if len(same) != 1 {
		return "", fmt.Errorf("underlay: the node IP %s is on the bridge %s already, and %d interfaces carry its MAC %s (%s), not one: name the uplink in underlay.interface",
			nodeIP, bridge, len(same), holder.MAC, strings.Join(same, ", "))
	}
	return same[0], nil
}
