package veth

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// GratuitousARP announces the pod's IPv4 address from inside the pod, so a
// neighbour holding an entry for a previous owner of the address updates it
// at once. Sent after the switch is programmed, or the switch drops it.
func GratuitousARP(netnsPath, ifName string, mac net.HardwareAddr, ip netip.Addr) error {
	if !ip.Is4() {
		return fmt.Errorf("gratuitous ARP needs an IPv4 address, got %s", ip)
	}
	podNS, err := ns.GetNS(netnsPath)
	if err != nil {
		return fmt.Errorf("opening pod netns %s: %w", netnsPath, err)
	}
	defer podNS.Close()
	return podNS.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(ifName)
		if err != nil {
			return err
		}
		// The socket belongs to the netns current at creation, i.e. the pod's.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
		if err != nil {
			return fmt.Errorf("gratuitous ARP socket: %w", err)
		}
		// Closing a packet socket waits for an RCU grace period
		// (synchronize_net in packet_release), several milliseconds that
		// the pod's ADD need not wait for: the socket is closed behind it.
		defer func() { go unix.Close(fd) }()
		sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: link.Attrs().Index, Halen: 6}
		copy(sa.Addr[:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		if err := unix.Sendto(fd, ARPAnnouncement(mac, ip), 0, sa); err != nil {
			return fmt.Errorf("sending gratuitous ARP on %s: %w", ifName, err)
		}
		return nil
	})
}

// ARPAnnouncement builds a broadcast ARP request whose sender and target
// address are both ip (RFC 5227's announcement), Ethernet header included.
func ARPAnnouncement(mac net.HardwareAddr, ip netip.Addr) []byte {
	b := make([]byte, 0, 42)
	b = append(b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	b = append(b, mac...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_ARP)
	b = binary.BigEndian.AppendUint16(b, 1)      // hardware: Ethernet
	b = binary.BigEndian.AppendUint16(b, 0x0800) // protocol: IPv4
	b = append(b, 6, 4)
	b = binary.BigEndian.AppendUint16(b, 1) // request
	ip4 := ip.As4()
	b = append(b, mac...)
	b = append(b, ip4[:]...)
	b = append(b, 0, 0, 0, 0, 0, 0)
	b = append(b, ip4[:]...)
	return b
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
