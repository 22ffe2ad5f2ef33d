package feature

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
)

var gwMAC = net.HardwareAddr{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x01}

// tcpSyn is a SYN from 10.244.1.5:40000 to 10.244.1.6:80.
func tcpSyn() []byte {
	l4 := make([]byte, 20)
	binary.BigEndian.PutUint16(l4[0:], 40000)
	binary.BigEndian.PutUint16(l4[2:], 80)
	binary.BigEndian.PutUint32(l4[4:], 1000)
	l4[12], l4[13] = 5<<4, tcpSYN
	f := append([]byte{}, gwMAC...)
	f = append(f, 0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x05, 0x08, 0x00)
	f = append(f, ipv4Header(netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("10.244.1.6"), 6, 20)...)
	return append(f, l4...)
}

func TestRejectReplies(t *testing.T) {
	p, err := ParsePacket(tcpSyn())
	if err != nil {
		t.Fatal(err)
	}
	rst := RejectReply(p, gwMAC)
	q, err := ParsePacket(rst)
	if err != nil {
		t.Fatal(err)
	}
	if q.Src != p.Dst || q.Dst != p.Src || q.SrcPort != 80 || q.DstPort != 40000 || q.Flags != tcpRST|tcpACK || q.Ack != 1001 {
		t.Errorf("RST = %+v, want 10.244.1.6:80 -> 10.244.1.5:40000 RST|ACK ack 1001", q)
	}
	if c := checksum(rst[14:34], 0); c != 0 {
		t.Errorf("IP checksum does not verify (%#x)", c)
	}
	// TCP checksum over the pseudo-header.
	var sum uint32
	for _, b := range [][]byte{rst[26:30], rst[30:34]} {
		sum += uint32(binary.BigEndian.Uint16(b[0:])) + uint32(binary.BigEndian.Uint16(b[2:]))
	}
	sum += 6 + 20
	if c := checksum(rst[34:], sum); c != 0 {
		t.Errorf("TCP checksum does not verify (%#x)", c)
	}

	udp := tcpSyn()
	udp[14+9] = 17
	p, _ = ParsePacket(udp)
	icmp := RejectReply(p, gwMAC)
	if icmp[34] != 3 || icmp[35] != 13 || checksum(icmp[34:], 0) != 0 {
		t.Errorf("ICMP reply is not a valid type 3 code 13: % x", icmp[34:42])
	}
}

func FuzzParsePacket(f *testing.F) {
	f.Add(tcpSyn())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePacket(b)
		if err != nil || len(p.IP) == 0 {
			return
		}
		_ = RejectReply(p, gwMAC)
	})
}
