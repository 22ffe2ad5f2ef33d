package hostnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrNoDummy: the kernel has no dummy device support (no module).
var ErrNoDummy = errors.New("the kernel does not support dummy devices")

// EnsureDevice returns the dummy device name, creating it (up) if needed.
func EnsureDevice(name string) (netlink.Link, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return nil, err
		}
		err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}})
		if errors.Is(err, unix.EOPNOTSUPP) {
			return nil, fmt.Errorf("creating the Egress IP device %s: %w", name, ErrNoDummy)
		}
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("creating the Egress IP device %s: %w", name, err)
		}
		if l, err = netlink.LinkByName(name); err != nil {
			return nil, err
		}
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return nil, fmt.Errorf("setting %s up: %w", name, err)
	}
	return l, nil
}

// Holder is where the Egress IPs sit: the plugin's dummy device, whose
// addresses are all Egress IPs, or (where the kernel has no dummy
// devices) the uplink, where the Egress IPs carry Label so the node's own
// addresses are never touched.
type Holder struct {
	Link  netlink.Link
	Label string
}

// OnUplink is a Holder on the uplink: IPv4 labels must start with the
// device name and fit 15 characters.
func OnUplink(l netlink.Link) Holder {
	label := l.Attrs().Name + ":egr"
	if len(label) > 15 {
		label = label[:15]
	}
	return Holder{Link: l, Label: label}
}

// Addrs are the Egress IPs on the holder.
func (h Holder) Addrs() (map[netip.Addr]bool, error) {
	as, err := netlink.AddrList(h.Link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]bool{}
	for _, a := range as {
		if h.Label != "" && a.Label != h.Label {
			continue
		}
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out[ip.Unmap()] = true
		}
	}
	return out, nil
}

// AddAddr puts ip on the device as a host address (/32 or /128), so it
// adds no subnet route that could compete with the uplink's.
func (h Holder) AddAddr(ip netip.Addr) error {
	a := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}, Label: h.Label}
	if err := netlink.AddrReplace(h.Link, a); err != nil {
		return fmt.Errorf("adding Egress IP %s to %s: %w", ip, h.Link.Attrs().Name, err)
	}
	return nil
}

// DelAddr removes ip from the device (absent is fine).
func (h Holder) DelAddr(ip netip.Addr) error {
	a := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}, Label: h.Label}
	if err := netlink.AddrDel(h.Link, a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("removing Egress IP %s from %s: %w", ip, h.Link.Attrs().Name, err)
	}
	return nil
}

// Clear removes every Egress IP from the holder, and the holder itself if
// it is the dummy device.
func (h Holder) Clear() error {
	if h.Link == nil {
		return nil
	}
	if h.Label == "" {
		return netlink.LinkDel(h.Link)
	}
	as, err := h.Addrs()
	if err != nil {
		return err
	}
	var errs []error
	for ip := range as {
		errs = append(errs, h.DelAddr(ip))
	}
	return errors.Join(errs...)
}

// UplinkOf is the device that holds the node address ip (where the
// Egress IPs are announced).
func UplinkOf(ip netip.Addr) (netlink.Link, error) {
	ls, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	for _, l := range ls {
		as, _ := netlink.AddrList(l, netlink.FAMILY_ALL)
		for _, a := range as {
			if x, ok := netip.AddrFromSlice(a.IP); ok && x.Unmap() == ip {
				return l, nil
			}
		}
	}
	return nil, fmt.Errorf("no device holds the node address %s", ip)
}

// Announce sends a gratuitous ARP (an RFC 5227 announcement) for ip on
// the uplink, so hosts and switches on the underlay move the IP to this
// node's MAC at once instead of after their ARP entry expires.
func Announce(uplink netlink.Link, ip netip.Addr) error {
	if !ip.Is4() {
		return fmt.Errorf("gratuitous ARP needs an IPv4 address, got %s", ip)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
	if err != nil {
		return fmt.Errorf("gratuitous ARP socket: %w", err)
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: uplink.Attrs().Index, Halen: 6}
	copy(sa.Addr[:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	if err := unix.Sendto(fd, announcement(uplink.Attrs().HardwareAddr, ip), 0, sa); err != nil {
		return fmt.Errorf("sending gratuitous ARP for %s on %s: %w", ip, uplink.Attrs().Name, err)
	}
	return nil
}

// announcement is a broadcast ARP request with sender and target ip.
func announcement(mac net.HardwareAddr, ip netip.Addr) []byte {
	b := make([]byte, 0, 42)
	b = append(b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	b = append(b, mac...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_ARP)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint16(b, 0x0800)
	b = append(b, 6, 4)
	b = binary.BigEndian.AppendUint16(b, 1)
	ip4 := ip.As4()
	b = append(b, mac...)
	b = append(b, ip4[:]...)
	b = append(b, 0, 0, 0, 0, 0, 0)
	b = append(b, ip4[:]...)
	return b
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
