package reject

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"
)

var gw = net.HardwareAddr{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x01}

// frame builds an Ethernet+IPv4 frame from 10.244.1.5 to 10.96.0.10
// carrying l4 with protocol proto.
func frame(proto byte, l4 []byte) []byte {
	f := []byte{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x01, 0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x05, 0x08, 0x00}
	ip := []byte{0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0, 10, 244, 1, 5, 10, 96, 0, 10}
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
	binary.BigEndian.PutUint16(ip[10:], checksum(ip, 0))
	return append(append(f, ip...), l4...)
}

func tcp(flags byte, seq, ack uint32) []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint16(b[0:], 40000)
	binary.BigEndian.PutUint16(b[2:], 80)
	binary.BigEndian.PutUint32(b[4:], seq)
	binary.BigEndian.PutUint32(b[8:], ack)
	b[12], b[13] = 5<<4, flags
	return b
}

// check verifies the answer's IPv4 header and returns its payload.
func check(t *testing.T, out []byte, proto byte) []byte {
	t.Helper()
	if string(out[0:6]) != string(gw) || string(out[6:12]) != string(gw) {
		t.Fatalf("answer is not addressed gateway to gateway: %x", out[:12])
	}
	ip := out[14:]
	if checksum(ip[:20], 0) != 0 {
		t.Errorf("bad IPv4 header checksum")
	}
	if ip[9] != proto {
		t.Errorf("protocol %d, want %d", ip[9], proto)
	}
	if net.IP(ip[12:16]).String() != "10.96.0.10" || net.IP(ip[16:20]).String() != "10.244.1.5" {
		t.Errorf("answer goes %s -> %s, want 10.96.0.10 -> 10.244.1.5", net.IP(ip[12:16]), net.IP(ip[16:20]))
	}
	if int(binary.BigEndian.Uint16(ip[2:4])) != len(ip) {
		t.Errorf("IP total length %d, frame holds %d", binary.BigEndian.Uint16(ip[2:4]), len(ip))
	}
	return ip[20:]
}

func TestAnswer(t *testing.T) {
	tests := []struct {
		name           string
		in             []byte
		wantFlags      byte
		wantSeq, wantA uint32
	}{
		{"syn", frame(protoTCP, tcp(tcpSYN, 1000, 0)), tcpRST | tcpACK, 0, 1001},
		{"ack", frame(protoTCP, tcp(tcpACK, 1000, 777)), tcpRST, 777, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Answer(tt.in, gw)
			if err != nil {
				t.Fatal(err)
			}
			seg := check(t, out, protoTCP)
			checkRST(t, seg, tt.wantFlags, tt.wantSeq, tt.wantA)
			if checksum(seg, pseudo([4]byte{10, 96, 0, 10}, [4]byte{10, 244, 1, 5}, protoTCP, len(seg))) != 0 {
				t.Errorf("bad TCP checksum")
			}
		})
	}
	for _, proto := range []byte{protoUDP, protoSCTP} {
		in := frame(proto, []byte{0x9c, 0x40, 0, 53, 0, 12, 0, 0, 'h', 'e', 'l', 'o'})
		out, err := Answer(in, gw)
		if err != nil {
			t.Fatalf("proto %d: %v", proto, err)
		}
		icmp := check(t, out, protoICMP)
		if icmp[0] != icmpUnreach || icmp[1] != icmpPortCode || checksum(icmp, 0) != 0 {
			t.Errorf("proto %d: ICMP %d/%d (checksum ok: %v), want port unreachable", proto, icmp[0], icmp[1], checksum(icmp, 0) == 0)
		}
		if want := in[14 : 14+20+8]; string(icmp[8:]) != string(want) {
			t.Errorf("proto %d: quote %x, want the IP header and 8 bytes %x", proto, icmp[8:], want)
		}
	}
}

func TestAnswerRefuses(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"rst", frame(protoTCP, tcp(tcpRST, 1, 0)), ErrNotAnswered},
		{"icmp", frame(protoICMP, make([]byte, 8)), ErrNotAnswered},
		{"short tcp", frame(protoTCP, make([]byte, 10)), ErrShort},
		{"arp", append(frame(protoTCP, tcp(tcpSYN, 1, 0))[:12], 0x08, 0x06, 0, 1), ErrNotAnswered},
	}
	for _, tt := range tests {
		if _, err := Answer(tt.in, gw); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
	}
}

func FuzzAnswer(f *testing.F) {
	f.Add(frame(protoTCP, tcp(tcpSYN, 1000, 0)))
	f.Add(frame(protoUDP, []byte{1, 2, 3, 4, 0, 8, 0, 0}))
	f.Add(frame(protoSCTP, make([]byte, 12)))
	f.Add(frame6(protoTCP, tcp(tcpSYN, 1000, 0)))
	f.Add(frame6(protoUDP, []byte{1, 2, 3, 4, 0, 8, 0, 0}))
	f.Add(frame6(protoSCTP, make([]byte, 12)))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Answer(in, gw)
		if err != nil {
			return
		}
		if binary.BigEndian.Uint16(out[12:14]) == ethTypeIPv6 {
			// The payload length is the answer's, and its transport
			// checksum holds.
			ip := out[14:]
			if len(ip) < ipv6Len || int(binary.BigEndian.Uint16(ip[4:6])) != len(ip)-ipv6Len ||
				checksum(ip[ipv6Len:], pseudo6([16]byte(ip[8:24]), [16]byte(ip[24:40]), ip[6], len(ip)-ipv6Len)) != 0 {
				t.Fatalf("bad IPv6 answer %x for %x", out, in)
			}
			return
		}
		if checksum(out[14:34], 0) != 0 {
			t.Fatalf("answer with a bad IPv4 checksum for %x", in)
		}
	})
}

// checkRST checks the TCP answer to a segment from port 40000 to port 80.
func checkRST(t *testing.T, seg []byte, flags byte, seq, ack uint32) {
	t.Helper()
	if seg[13] != flags {
		t.Errorf("flags %#x, want %#x", seg[13], flags)
	}
	if s, a := binary.BigEndian.Uint32(seg[4:]), binary.BigEndian.Uint32(seg[8:]); s != seq || a != ack {
		t.Errorf("seq %d ack %d, want %d %d", s, a, seq, ack)
	}
	if sp, dp := binary.BigEndian.Uint16(seg[0:]), binary.BigEndian.Uint16(seg[2:]); sp != 80 || dp != 40000 {
		t.Errorf("ports %d -> %d, want 80 -> 40000", sp, dp)
	}
}
