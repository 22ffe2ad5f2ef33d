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

// Holder is where the Egress IPs sit. IPv4 ones go on the plugin's
// dummy device, whose IPv4 addresses are all Egress IPs, or (where the
// kernel has no dummy devices) on the uplink, where they carry Label so
// the node's own addresses are never touched. IPv6 ones always go on the
// uplink (see AddAddr): the kernel answers neighbour solicitations only
// for addresses of the interface they arrive on.
type Holder struct {
	Link   netlink.Link
	Label  string
	Uplink netlink.Link
}

// OnUplink is a Holder on the uplink: IPv4 labels must start with the
// device name and fit 15 characters.
func OnUplink(l netlink.Link) Holder {
	label := l.Attrs().Name + ":egr"
	if len(label) > 15 {
		label = label[:15]
	}
	return Holder{Link: l, Label: label, Uplink: l}
}

// infiniteLifetime is the "forever" of an address lifetime.
const infiniteLifetime = 0xffffffff

// Addrs are the Egress IPs on the holder.
func (h Holder) Addrs() (map[netip.Addr]bool, error) {
	out := map[netip.Addr]bool{}
	as, err := netlink.AddrList(h.Link, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		if h.Label != "" && a.Label != h.Label {
			continue
		}
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out[ip.Unmap()] = true
		}
	}
	if h.Uplink == nil {
		return out, nil
	}
	as, err = netlink.AddrList(h.Uplink, netlink.FAMILY_V6)
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && isEgressIPv6(a) {
			out[ip] = true
		}
	}
	return out, nil
}

// isEgressIPv6 tells the plugin's IPv6 addresses from the node's own: a
// host address (/128) added without duplicate address detection and
// deprecated from the start (preferred lifetime 0), a combination neither
// SLAAC, DHCPv6 nor an operator's `ip addr add` makes.
func isEgressIPv6(a netlink.Addr) bool {
	ones, bits := a.Mask.Size()
	return bits == 128 && ones == 128 && a.Flags&unix.IFA_F_NODAD != 0 && a.PreferedLft == 0
}

// addrOf is the netlink address AddAddr and DelAddr use for ip.
func (h Holder) addrOf(ip netip.Addr) (netlink.Link, *netlink.Addr) {
	n := &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}
	if ip.Is4() {
		return h.Link, &netlink.Addr{IPNet: n, Label: h.Label}
	}
	// Deprecated (preferred lifetime 0): the kernel never picks it as the
	// source of the node's own connections; without DAD: it is usable at
	// once, and on a failover the old holder may still answer for it.
	return h.Uplink, &netlink.Addr{IPNet: n, Flags: unix.IFA_F_NODAD, PreferedLft: 0, ValidLft: infiniteLifetime}
}

// AddAddr puts ip on the holder as a host address (/32 or /128), so it
// adds no subnet route that could compete with the uplink's.
func (h Holder) AddAddr(ip netip.Addr) error {
	l, a := h.addrOf(ip)
	if l == nil {
		return fmt.Errorf("adding Egress IP %s: no uplink to hold IPv6 addresses", ip)
	}
	if err := netlink.AddrReplace(l, a); err != nil {
		return fmt.Errorf("adding Egress IP %s to %s: %w", ip, l.Attrs().Name, err)
	}
	return nil
}

// DelAddr removes ip from the holder (absent is fine).
func (h Holder) DelAddr(ip netip.Addr) error {
	l, a := h.addrOf(ip)
	if l == nil {
		return nil
	}
	if err := netlink.AddrDel(l, a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("removing Egress IP %s from %s: %w", ip, l.Attrs().Name, err)
	}
	return nil
}

// Clear removes every Egress IP from the holder, and the holder itself if
// it is the dummy device.
func (h Holder) Clear() error {
	if h.Link == nil {
		return nil
	}
	as, err := h.Addrs()
	if err != nil {
		return err
	}
	var errs []error
	for ip := range as {
		if ip.Is6() || h.Label != "" {
			errs = append(errs, h.DelAddr(ip))
		}
	}
	if h.Label == "" {
		errs = append(errs, netlink.LinkDel(h.Link))
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

// Announce tells the underlay that ip is now at the uplink's MAC, at once
// rather than when the neighbours' entries expire: a gratuitous ARP (an
// RFC 5227 announcement) for IPv4, an unsolicited neighbour advertisement
// with the override flag (RFC 4861 7.2.6) to all nodes for IPv6.
func Announce(uplink netlink.Link, ip netip.Addr) error {
	var proto uint16
	var frame []byte
	if ip.Is4() {
		proto, frame = unix.ETH_P_ARP, announcement(uplink.Attrs().HardwareAddr, ip)
	} else {
		proto, frame = unix.ETH_P_IPV6, advertisement(uplink.Attrs().HardwareAddr, ip)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(proto)))
	if err != nil {
		return fmt.Errorf("announcing %s: packet socket: %w", ip, err)
	}
	defer unix.Close(fd)
	sa := &unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: uplink.Attrs().Index, Halen: 6}
	copy(sa.Addr[:], frame[:6])
	if err := unix.Sendto(fd, frame, 0, sa); err != nil {
		return fmt.Errorf("announcing %s on %s: %w", ip, uplink.Attrs().Name, err)
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

// allNodes is ff02::1, where unsolicited advertisements go.
var allNodes = netip.MustParseAddr("ff02::1")

// advertisement is an unsolicited neighbour advertisement for ip from
// mac: Ethernet to 33:33:00:00:00:01, IPv6 from ip to ff02::1 with hop
// limit 255 (receivers drop any other), ICMPv6 type 136 with the override
// flag and a target link-layer address option.
func advertisement(mac net.HardwareAddr, ip netip.Addr) []byte {
	const icmpLen = 32 // type, code, checksum, flags, target (16), option (8)
	icmp := make([]byte, 0, icmpLen)
	icmp = append(icmp, 136, 0, 0, 0)
	icmp = append(icmp, 0x20, 0, 0, 0) // O: override the neighbours' cached address
	t := ip.As16()
	icmp = append(icmp, t[:]...)
	icmp = append(icmp, 2, 1) // target link-layer address, 8 bytes
	icmp = append(icmp, mac...)
	binary.BigEndian.PutUint16(icmp[2:], icmpv6Checksum(ip, allNodes, icmp))

	b := make([]byte, 0, 14+40+icmpLen)
	b = append(b, 0x33, 0x33, 0, 0, 0, 1)
	b = append(b, mac...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_IPV6)
	b = append(b, 0x60, 0, 0, 0) // version 6, no traffic class or flow label
	b = binary.BigEndian.AppendUint16(b, icmpLen)
	b = append(b, unix.IPPROTO_ICMPV6, 255)
	b = append(b, t[:]...)
	d := allNodes.As16()
	b = append(b, d[:]...)
	return append(b, icmp...)
}

// icmpv6Checksum is the ICMPv6 checksum of msg (its checksum field zero)
// over the IPv6 pseudo-header of src and dst (RFC 4443 2.3).
func icmpv6Checksum(src, dst netip.Addr, msg []byte) uint16 {
	s, d := src.As16(), dst.As16()
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(s[:])
	add(d[:])
	sum += uint32(len(msg)) + unix.IPPROTO_ICMPV6
	add(msg)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
