package reject

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
)

// Errors Answer returns; test them with errors.Is.
var (
	// ErrShort: the frame ends inside a header.
	ErrShort = errors.New("truncated packet")
	// ErrNotAnswered: a packet that gets no answer (not IP, a TCP RST,
	// a fragment other than the first, an IPv6 extension header, a
	// protocol without one).
	ErrNotAnswered = errors.New("packet gets no reject answer")
)

const (
	ethLen      = 14
	ethTypeIPv4 = 0x0800
	ethTypeIPv6 = 0x86dd
	ipv6Len     = 40
	protoICMPv6 = 58
	// ICMPv6 destination unreachable, port unreachable (RFC 4443 3.1).
	icmp6Unreach  = 1
	icmp6PortCode = 4
	// icmp6MaxQuote keeps an ICMPv6 error within the IPv6 minimum MTU
	// (1280) less its own headers (RFC 4443 2.4 (c)).
	icmp6MaxQuote = 1280 - ipv6Len - 8
	protoICMP     = 1
	protoTCP      = 6
	protoUDP      = 17
	protoSCTP     = 132
	tcpFIN        = 0x01
	tcpSYN        = 0x02
	tcpRST        = 0x04
	tcpACK        = 0x10
	icmpUnreach   = 3
	icmpPortCode  = 3
	// quoteL4 is how much of the rejected packet's transport header an
	// ICMP error quotes after its IP header (RFC 792: at least 8 bytes).
	quoteL4 = 8
	ttl     = 64
)

// Answer returns the frame that rejects the packet in frame: from
// gatewayMAC to gatewayMAC, so the switch routes it.
func Answer(frame []byte, gatewayMAC net.HardwareAddr) ([]byte, error) {
	if len(gatewayMAC) != 6 {
		return nil, fmt.Errorf("reject: gateway MAC %q is not an Ethernet address", gatewayMAC)
	}
	if len(frame) < ethLen {
		return nil, fmt.Errorf("%w: %d bytes, no Ethernet header", ErrShort, len(frame))
	}
	switch et := binary.BigEndian.Uint16(frame[12:14]); et {
	case ethTypeIPv4:
	case ethTypeIPv6:
		return answer6(frame[ethLen:], gatewayMAC)
	default:
		return nil, fmt.Errorf("%w: EtherType %#04x is not IPv4 or IPv6", ErrNotAnswered, et)
	}
	ip := frame[ethLen:]
	if len(ip) < 20 {
		return nil, fmt.Errorf("%w: %d bytes, no IPv4 header", ErrShort, len(ip))
	}
	if ip[0]>>4 != 4 {
		return nil, fmt.Errorf("%w: IP version %d", ErrNotAnswered, ip[0]>>4)
	}
	ihl := int(ip[0]&0x0f) * 4
	if ihl < 20 || len(ip) < ihl {
		return nil, fmt.Errorf("%w: IPv4 header length %d of %d bytes", ErrShort, ihl, len(ip))
	}
	if binary.BigEndian.Uint16(ip[6:8])&0x1fff != 0 {
		return nil, fmt.Errorf("%w: a non-first fragment", ErrNotAnswered)
	}
	src, dst := [4]byte(ip[12:16]), [4]byte(ip[16:20])
	l4 := ip[ihl:]
	var body []byte
	var proto byte
	switch ip[9] {
	case protoTCP:
		seg, err := rst(l4, int(binary.BigEndian.Uint16(ip[2:4]))-ihl, pseudo(dst, src, protoTCP, 20))
		if err != nil {
			return nil, err
		}
		body, proto = seg, protoTCP
	case protoUDP, protoSCTP:
		n := min(len(l4), quoteL4)
		if n < quoteL4 && len(l4) < 4 {
			return nil, fmt.Errorf("%w: %d bytes of transport header", ErrShort, len(l4))
		}
		body = make([]byte, 8, 8+ihl+n)
		body[0], body[1] = icmpUnreach, icmpPortCode
		body = append(body, ip[:ihl+n]...)
		binary.BigEndian.PutUint16(body[2:4], checksum(body, 0))
		proto = protoICMP
	default:
		return nil, fmt.Errorf("%w: IP protocol %d", ErrNotAnswered, ip[9])
	}
	out := make([]byte, 0, ethLen+20+len(body))
	out = append(out, gatewayMAC...)
	out = append(out, gatewayMAC...)
	out = binary.BigEndian.AppendUint16(out, ethTypeIPv4)
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:4], uint16(20+len(body)))
	h[8], h[9] = ttl, proto
	copy(h[12:16], dst[:]) // from the Service address the client used
	copy(h[16:20], src[:])
	binary.BigEndian.PutUint16(h[10:12], checksum(h, 0))
	out = append(out, h...)
	return append(out, body...), nil
}

// answer6 is answer for an IPv6 packet ip (from its header on): a TCP RST
// or an ICMPv6 port unreachable from the address the client dialled.
// Only a transport header right after the IPv6 header is answered: a
// client's new connection carries no extension header.
func answer6(ip []byte, gatewayMAC net.HardwareAddr) ([]byte, error) {
	if len(ip) < ipv6Len {
		return nil, fmt.Errorf("%w: %d bytes, no IPv6 header", ErrShort, len(ip))
	}
	if ip[0]>>4 != 6 {
		return nil, fmt.Errorf("%w: IP version %d", ErrNotAnswered, ip[0]>>4)
	}
	src, dst := [16]byte(ip[8:24]), [16]byte(ip[24:40])
	l4 := ip[ipv6Len:]
	var body []byte
	var proto byte
	switch ip[6] {
	case protoTCP:
		seg, err := rst(l4, int(binary.BigEndian.Uint16(ip[4:6])), pseudo6(dst, src, protoTCP, 20))
		if err != nil {
			return nil, err
		}
		body, proto = seg, protoTCP
	case protoUDP, protoSCTP:
		if len(l4) < 4 {
			return nil, fmt.Errorf("%w: %d bytes of transport header", ErrShort, len(l4))
		}
		n := min(len(ip), icmp6MaxQuote)
		body = make([]byte, 8, 8+n)
		body[0], body[1] = icmp6Unreach, icmp6PortCode
		body = append(body, ip[:n]...)
		binary.BigEndian.PutUint16(body[2:4], checksum(body, pseudo6(dst, src, protoICMPv6, len(body))))
		proto = protoICMPv6
	default:
		return nil, fmt.Errorf("%w: IPv6 next header %d", ErrNotAnswered, ip[6])
	}
	out := make([]byte, 0, ethLen+ipv6Len+len(body))
	out = append(out, gatewayMAC...)
	out = append(out, gatewayMAC...)
	out = binary.BigEndian.AppendUint16(out, ethTypeIPv6)
	h := make([]byte, ipv6Len)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:6], uint16(len(body)))
	h[6], h[7] = proto, ttl
	copy(h[8:24], dst[:]) // from the Service address the client used
	copy(h[24:40], src[:])
	out = append(out, h...)
	return append(out, body...), nil
}

// rst is the RST segment (RFC 9293 3.10.7.1) answering the TCP segment
// seg, whose length per its IP header is segLen; ph is the sum of the
// answer's pseudo-header.
func rst(seg []byte, segLen int, ph uint32) ([]byte, error) {
	if len(seg) < 20 {
		return nil, fmt.Errorf("%w: %d bytes of TCP header", ErrShort, len(seg))
	}
	flags := seg[13]
	if flags&tcpRST != 0 {
		return nil, fmt.Errorf("%w: a TCP RST", ErrNotAnswered)
	}
	off := int(seg[12]>>4) * 4
	if off < 20 {
		return nil, fmt.Errorf("%w: TCP data offset %d", ErrShort, off)
	}
	data := max(segLen-off, 0)
	out := make([]byte, 20)
	copy(out[0:2], seg[2:4]) // source port: the port the client dialled
	copy(out[2:4], seg[0:2])
	if flags&tcpACK != 0 {
		copy(out[4:8], seg[8:12]) // seq = their ack
		out[13] = tcpRST
	} else {
		ack := binary.BigEndian.Uint32(seg[4:8]) + uint32(data)
		if flags&tcpSYN != 0 {
			ack++
		}
		if flags&tcpFIN != 0 {
			ack++
		}
		binary.BigEndian.PutUint32(out[8:12], ack)
		out[13] = tcpRST | tcpACK
	}
	out[12] = 5 << 4
	binary.BigEndian.PutUint16(out[16:18], checksum(out, ph))
	return out, nil
}

// pseudo is the sum of the IPv4 pseudo-header for a transport checksum.
func pseudo(src, dst [4]byte, proto byte, n int) uint32 {
	var s uint32
	for i := 0; i < 4; i += 2 {
		s += uint32(binary.BigEndian.Uint16(src[i:])) + uint32(binary.BigEndian.Uint16(dst[i:]))
	}
	return s + uint32(proto) + uint32(n)
}

// pseudo6 is the sum of the IPv6 pseudo-header (RFC 8200 8.1) for an
// upper-layer checksum.
func pseudo6(src, dst [16]byte, proto byte, n int) uint32 {
	var s uint32
	for i := 0; i < 16; i += 2 {
		s += uint32(binary.BigEndian.Uint16(src[i:])) + uint32(binary.BigEndian.Uint16(dst[i:]))
	}
	return s + uint32(n>>16) + uint32(n&0xffff) + uint32(proto)
}

// checksum is the Internet checksum (RFC 1071) of b, starting from sum.
func checksum(b []byte, sum uint32) uint16 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
