package hostnet

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

var mac = net.HardwareAddr{0x0a, 0x58, 0xc6, 0x12, 0x00, 0x01}

// The gratuitous ARP is a broadcast request whose sender and target are
// the Egress IP, from the uplink's MAC.
func TestAnnouncement(t *testing.T) {
	ip := netip.MustParseAddr("198.18.0.100")
	b := announcement(mac, ip)
	if len(b) != 42 || !bytes.Equal(b[:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) || !bytes.Equal(b[6:12], mac) {
		t.Fatalf("frame %x: want 42 bytes, broadcast, from %s", b, mac)
	}
	if binary.BigEndian.Uint16(b[12:]) != unix.ETH_P_ARP || binary.BigEndian.Uint16(b[20:]) != 1 {
		t.Errorf("frame %x: not an ARP request", b)
	}
	if !bytes.Equal(b[28:32], ip.AsSlice()) || !bytes.Equal(b[38:42], ip.AsSlice()) || !bytes.Equal(b[22:28], mac) {
		t.Errorf("frame %x: sender and target must be %s at %s", b, ip, mac)
	}
}

// The unsolicited neighbour advertisement is what a receiver accepts
// (RFC 4861 7.1.2): hop limit 255, ICMPv6 type 136 code 0, a correct
// checksum (computed here independently by golang.org/x/net/icmp), the
// override flag, the target and its link-layer address.
func TestAdvertisement(t *testing.T) {
	ip := netip.MustParseAddr("fd00:198:18::100")
	b := advertisement(mac, ip)
	if !bytes.Equal(b[:6], []byte{0x33, 0x33, 0, 0, 0, 1}) || !bytes.Equal(b[6:12], mac) || binary.BigEndian.Uint16(b[12:]) != unix.ETH_P_IPV6 {
		t.Fatalf("ethernet header %x: want 33:33:00:00:00:01 from %s, IPv6", b[:14], mac)
	}
	h, err := ipv6.ParseHeader(b[14:])
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 6 || h.NextHeader != unix.IPPROTO_ICMPV6 || h.HopLimit != 255 || h.PayloadLen != len(b)-54 ||
		!h.Src.Equal(ip.AsSlice()) || !h.Dst.Equal(net.ParseIP("ff02::1")) {
		t.Fatalf("IPv6 header %+v: want ICMPv6 from %s to ff02::1, hop limit 255, payload %d", h, ip, len(b)-54)
	}
	body := b[54:]
	m, err := icmp.ParseMessage(unix.IPPROTO_ICMPV6, body)
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != ipv6.ICMPTypeNeighborAdvertisement || m.Code != 0 {
		t.Errorf("ICMPv6 type %v code %d, want a neighbor advertisement", m.Type, m.Code)
	}
	// The same message marshalled by x/net with the pseudo-header must
	// carry the same checksum.
	raw := m.Body.(*icmp.RawBody).Data
	want, err := (&icmp.Message{Type: ipv6.ICMPTypeNeighborAdvertisement, Body: &icmp.RawBody{Data: raw}}).
		Marshal(icmp.IPv6PseudoHeader(ip.AsSlice(), net.ParseIP("ff02::1")))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, body) {
		t.Errorf("ICMPv6 message\n got %x\nwant %x (x/net's checksum)", body, want)
	}
	if raw[0] != 0x20 {
		t.Errorf("flags %#x, want only override (0x20)", raw[0])
	}
	if !bytes.Equal(raw[4:20], ip.AsSlice()) || raw[20] != 2 || raw[21] != 1 || !bytes.Equal(raw[22:28], mac) {
		t.Errorf("target and option %x: want %s with target link-layer address %s", raw[4:], ip, mac)
	}
}

// Only the plugin's own IPv6 addresses count as Egress IPs on the uplink.
func TestIsEgressIPv6(t *testing.T) {
	addr := func(s string, flags, preferred int) netlink.Addr {
		a, err := netlink.ParseAddr(s)
		if err != nil {
			t.Fatal(err)
		}
		a.Flags, a.PreferedLft = flags, preferred
		return *a
	}
	for _, tc := range []struct {
		name string
		a    netlink.Addr
		want bool
	}{
		{"ours: /128, no DAD, deprecated", addr("fd00:198:18::100/128", unix.IFA_F_NODAD|unix.IFA_F_DEPRECATED, 0), true},
		{"the node's SLAAC address", addr("fd00:198:18::1/64", unix.IFA_F_MANAGETEMPADDR, 3600), false},
		{"a DHCPv6 /128", addr("fd00:198:18::5/128", 0, 3600), false},
		{"an operator's /128 without DAD, preferred", addr("fd00:198:18::6/128", unix.IFA_F_NODAD, infiniteLifetime), false},
		{"link-local", addr("fe80::1/64", unix.IFA_F_PERMANENT, infiniteLifetime), false},
	} {
		if got := isEgressIPv6(tc.a); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
