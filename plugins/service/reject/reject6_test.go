package reject

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

var (
	client6  = netip.MustParseAddr("fd00:10:244:1::5")
	service6 = netip.MustParseAddr("fd00:10:96::a")
)

// frame6 builds an Ethernet+IPv6 frame from client6 to service6 whose
// next header is proto, carrying l4.
func frame6(proto byte, l4 []byte) []byte {
	f := []byte{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x01, 0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x05, 0x86, 0xdd}
	ip := make([]byte, ipv6Len)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
	ip[6], ip[7] = proto, 64
	s, d := client6.As16(), service6.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	return append(append(f, ip...), l4...)
}

// check6 verifies the answer's IPv6 header (from the Service to the
// client, its length) and the transport checksum, and returns the payload.
func check6(t *testing.T, out []byte, proto byte) []byte {
	t.Helper()
	if string(out[0:6]) != string(gw) || string(out[6:12]) != string(gw) || binary.BigEndian.Uint16(out[12:14]) != ethTypeIPv6 {
		t.Fatalf("answer is not an IPv6 frame gateway to gateway: %x", out[:14])
	}
	ip := out[14:]
	if ip[0]>>4 != 6 || ip[6] != proto {
		t.Fatalf("version %d next header %d, want 6 and %d", ip[0]>>4, ip[6], proto)
	}
	from, to := netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
	if from != service6 || to != client6 {
		t.Errorf("answer goes %s -> %s, want %s -> %s", from, to, service6, client6)
	}
	body := ip[ipv6Len:]
	if int(binary.BigEndian.Uint16(ip[4:6])) != len(body) {
		t.Errorf("payload length %d, frame holds %d", binary.BigEndian.Uint16(ip[4:6]), len(body))
	}
	if checksum(body, pseudo6([16]byte(ip[8:24]), [16]byte(ip[24:40]), proto, len(body))) != 0 {
		t.Errorf("bad %d checksum", proto)
	}
	return body
}

func TestAnswerIPv6(t *testing.T) {
	for _, tt := range []struct {
		name           string
		in             []byte
		wantFlags      byte
		wantSeq, wantA uint32
	}{
		{"syn", frame6(protoTCP, tcp(tcpSYN, 1000, 0)), tcpRST | tcpACK, 0, 1001},
		{"ack with 3 bytes of data", frame6(protoTCP, append(tcp(tcpACK, 1000, 777), 'a', 'b', 'c')), tcpRST, 777, 0},
		{"fin", frame6(protoTCP, tcp(tcpFIN, 1000, 0)), tcpRST | tcpACK, 0, 1001},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Answer(tt.in, gw)
			if err != nil {
				t.Fatal(err)
			}
			seg := check6(t, out, protoTCP)
			checkRST(t, seg, tt.wantFlags, tt.wantSeq, tt.wantA)
		})
	}
	for _, proto := range []byte{protoUDP, protoSCTP} {
		in := frame6(proto, []byte{0x9c, 0x40, 0, 53, 0, 12, 0, 0, 'h', 'e', 'l', 'o'})
		out, err := Answer(in, gw)
		if err != nil {
			t.Fatalf("next header %d: %v", proto, err)
		}
		icmp := check6(t, out, protoICMPv6)
		if icmp[0] != icmp6Unreach || icmp[1] != icmp6PortCode {
			t.Errorf("next header %d: ICMPv6 %d/%d, want 1/4 (port unreachable)", proto, icmp[0], icmp[1])
		}
		if want := in[14:]; string(icmp[8:]) != string(want) {
			t.Errorf("next header %d: quote %x, want the whole packet %x", proto, icmp[8:], want)
		}
	}
}

func TestAnswerIPv6Refuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []byte
		want error
	}{
		{"no IPv6 header", frame6(protoTCP, nil)[:30], ErrShort},
		{"rst", frame6(protoTCP, tcp(tcpRST, 1, 0)), ErrNotAnswered},
		{"icmpv6", frame6(protoICMPv6, make([]byte, 8)), ErrNotAnswered},
		{"hop-by-hop options", frame6(0, make([]byte, 8)), ErrNotAnswered},
		{"fragment", frame6(44, make([]byte, 8)), ErrNotAnswered},
		{"short tcp", frame6(protoTCP, make([]byte, 10)), ErrShort},
		{"short udp", frame6(protoUDP, make([]byte, 3)), ErrShort},
		{"IPv4 in an IPv6 frame", append(frame6(protoTCP, nil)[:14], frame(protoTCP, tcp(tcpSYN, 1, 0))[14:]...), ErrNotAnswered},
	} {
		if _, err := Answer(tt.in, gw); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
	}
}
