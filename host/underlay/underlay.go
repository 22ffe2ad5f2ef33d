package underlay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"switchyard.dev/switchyard/host/ovsdb"
)

// Bridger is the part of the OVSDB client Setup needs.
type Bridger interface {
	EnsureUnderlayBridge(ctx context.Context, s ovsdb.UnderlaySpec) error
}

// Spec names the bridge and the uplink.
type Spec struct {
	Bridge       string
	Uplink       string
	DatapathType string
}

// Setup makes Bridge hold the node IP with Uplink as its port. It returns
// once the bridge's interface is up and carries Uplink's addresses and
// routes.
func Setup(ctx context.Context, db Bridger, s Spec, log *slog.Logger) error {
	uplink, err := netlink.LinkByName(s.Uplink)
	if err != nil {
		return fmt.Errorf("underlay: uplink %q: %w (set underlay.interface to the interface that holds the node IP)", s.Uplink, err)
	}
	err = db.EnsureUnderlayBridge(ctx, ovsdb.UnderlaySpec{Bridge: s.Bridge, Uplink: s.Uplink, DatapathType: s.DatapathType,
		HWAddr: uplink.Attrs().HardwareAddr.String(), MTU: uplink.Attrs().MTU})
	if err != nil {
		return fmt.Errorf("underlay: %w", err)
	}
	br, err := waitLink(ctx, s.Bridge, uplink.Attrs().HardwareAddr.String())
	if err != nil {
		return err
	}
	if br.Attrs().MTU != uplink.Attrs().MTU {
		if err := netlink.LinkSetMTU(br, uplink.Attrs().MTU); err != nil {
			return fmt.Errorf("underlay: setting %s MTU %d: %w", s.Bridge, uplink.Attrs().MTU, err)
		}
	}
	moved, err := move(uplink, br)
	if err != nil {
		return err
	}
	if moved > 0 {
		log.Info("moved the node's addresses onto the underlay bridge", "bridge", s.Bridge, "uplink", s.Uplink, "addresses", moved)
	}
	return nil
}

// Restore is Setup's undo, for the uninstall: it gives the node's
// addresses and routes back from the bridge's interface to the uplink and
// brings the uplink up, so the node keeps its IP when the bridge is
// deleted (on the userspace datapath the bridge's interface is a tap
// device that outlives ovs-vswitchd, holding the node IP but passing no
// packet: the node is cut off from the network until the IP is back on
// the uplink). A missing bridge interface is nothing to restore.
func Restore(bridge, uplink string, log *slog.Logger) (int, error) {
	br, err := netlink.LinkByName(bridge)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return 0, nil
		}
		return 0, fmt.Errorf("underlay: bridge interface %q: %w", bridge, err)
	}
	up, err := netlink.LinkByName(uplink)
	if err != nil {
		return 0, fmt.Errorf("underlay: uplink %q: %w", uplink, err)
	}
	moved, err := move(br, up)
	if err != nil {
		return moved, err
	}
	if moved > 0 {
		log.Info("gave the node's addresses back to the uplink", "bridge", bridge, "uplink", uplink, "addresses", moved)
	}
	return moved, nil
}

// waitLink waits for ovs-vswitchd to create the bridge's internal device
// and give it the uplink's MAC (other_config:hwaddr). Only then may routes
// move onto it: ovs-vswitchd sets a tap device's MAC by taking it down and
// up again, and the kernel drops every static route of a device that goes
// down.
func waitLink(ctx context.Context, name, mac string) (netlink.Link, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := netlink.LinkByName(name)
		if err == nil && l.Attrs().HardwareAddr.String() == mac {
			return l, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("its MAC is %s, not the uplink's %s", l.Attrs().HardwareAddr, mac)
			}
			return nil, fmt.Errorf("underlay: device %s was not ready within 10s after creating its bridge (is ovs-vswitchd running?): %w", name, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// movable says whether an address belongs to the node rather than to the
// link: every IPv4 address, and IPv6 addresses that are not link-local.
func movable(a netlink.Addr) bool {
	if a.IP.To4() != nil {
		return true
	}
	return !a.IP.IsLinkLocalUnicast()
}

// move transfers the addresses of from and the routes that use it to to,
// and brings to up (Setup: from the uplink to the bridge; Restore: back). Routes the kernel derives from an address come back by
// themselves; the others (a default route, static routes) are re-added.
func move(from, to netlink.Link) (int, error) {
	addrs, err := netlink.AddrList(from, netlink.FAMILY_ALL)
	if err != nil {
		return 0, fmt.Errorf("underlay: listing addresses of %s: %w", from.Attrs().Name, err)
	}
	routes, err := netlink.RouteList(from, netlink.FAMILY_ALL)
	if err != nil {
		return 0, fmt.Errorf("underlay: listing routes of %s: %w", from.Attrs().Name, err)
	}
	if err := netlink.LinkSetUp(to); err != nil {
		return 0, fmt.Errorf("underlay: setting %s up: %w", to.Attrs().Name, err)
	}
	n := 0
	for _, a := range addrs {
		if !movable(a) {
			continue
		}
		if err := netlink.AddrDel(from, &a); err != nil {
			return n, fmt.Errorf("underlay: removing %s from %s: %w", a.IPNet, from.Attrs().Name, err)
		}
		na := &netlink.Addr{IPNet: a.IPNet, Label: "", Flags: a.Flags | unix.IFA_F_NODAD, Scope: a.Scope}
		if err := netlink.AddrReplace(to, na); err != nil {
			return n, fmt.Errorf("underlay: adding %s to %s: %w", a.IPNet, to.Attrs().Name, err)
		}
		n++
	}
	for _, r := range routes {
		if r.Protocol == unix.RTPROT_KERNEL || (r.Dst != nil && r.Dst.IP.IsLinkLocalUnicast()) || r.Table == unix.RT_TABLE_LOCAL {
			continue
		}
		r.LinkIndex = to.Attrs().Index
		r.ILinkIndex = 0
		// State the kernel reports about the old device (no carrier:
		// linkdown), never accepted in a new route.
		r.Flags &^= unix.RTNH_F_DEAD | unix.RTNH_F_LINKDOWN
		if err := netlink.RouteReplace(&r); err != nil && !errors.Is(err, unix.EEXIST) {
			return n, fmt.Errorf("underlay: moving route %s to %s: %w", r, to.Attrs().Name, err)
		}
	}
	return n, nil
}
