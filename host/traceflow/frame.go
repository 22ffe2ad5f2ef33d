package traceflow

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"switchyard.dev/switchyard/host/openflow"
)

// ErrNoFrame says Frame cannot build the packet (only IPv4 with TCP, UDP,
// SCTP or ICMP is built).
var ErrNoFrame = errors.New("traceflow: only IPv4 TCP, UDP, SCTP and ICMP packets can be injected")

// Frame builds the packet's bytes (Ethernet, IPv4, and a TCP, UDP, SCTP or
// ICMP header with a small payload), checksums included, so that the
// switch's conntrack takes it as valid.
func (p *Packet) Frame(payload []byte) ([]byte, error) {
	if p.Uint(openflow.FieldEthType) != 0x0800 {
		return nil, ErrNoFrame
	}
	proto := uint8(p.Uint(openflow.FieldIPProto))
	var l4 []byte
	switch proto {
	case 6:
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], uint16(p.Uint(openflow.FieldTCPSrc)))
		binary.BigEndian.PutUint16(l4[2:], uint16(p.Uint(openflow.FieldTCPDst)))
		binary.BigEndian.PutUint32(l4[4:], 0x5357_0001) // sequence
		flags := uint16(p.Uint(openflow.FieldTCPFlags))
		if flags == 0 {
			flags = 0x002
		}
		binary.BigEndian.PutUint16(l4[12:], 5<<12|flags&0x1ff)
		binary.BigEndian.PutUint16(l4[14:], 64240) // window
	case 17:
		l4 = make([]byte, 8)
		binary.BigEndian.PutUint16(l4[0:], uint16(p.Uint(openflow.FieldUDPSrc)))
		binary.BigEndian.PutUint16(l4[2:], uint16(p.Uint(openflow.FieldUDPDst)))
	case 132:
		l4 = make([]byte, 12)
		binary.BigEndian.PutUint16(l4[0:], uint16(p.Uint(openflow.FieldSCTPSrc)))
		binary.BigEndian.PutUint16(l4[2:], uint16(p.Uint(openflow.FieldSCTPDst)))
	case 1:
		l4 = make([]byte, 8)
		l4[0], l4[1] = byte(p.Uint(openflow.FieldICMPv4Type)), byte(p.Uint(openflow.FieldICMPv4Code))
		binary.BigEndian.PutUint16(l4[4:], 0x5357) // identifier
	default:
		return nil, ErrNoFrame
	}
	seg := append(l4, payload...)
	src, dst := p.Get(openflow.FieldIPv4Src), p.Get(openflow.FieldIPv4Dst)
	switch proto {
	case 6, 17:
		if proto == 17 {
			binary.BigEndian.PutUint16(seg[4:], uint16(len(seg)))
		}
		pseudo := make([]byte, 0, 12+len(seg))
		pseudo = append(append(append(pseudo, src...), dst...), 0, proto, byte(len(seg)>>8), byte(len(seg)))
		sum := checksum(append(pseudo, seg...))
		if proto == 17 && sum == 0 {
			sum = 0xffff
		}
		at := 16
		if proto == 17 {
			at = 6
		}
		binary.BigEndian.PutUint16(seg[at:], sum)
	case 132:
		binary.LittleEndian.PutUint32(seg[8:], crc32.Checksum(seg, crc32.MakeTable(crc32.Castagnoli)))
	case 1:
		binary.BigEndian.PutUint16(seg[2:], checksum(seg))
	}
	ip := make([]byte, 20)
	ip[0] = 0x45
	ip[1] = byte(p.Uint(openflow.FieldIPDSCP))<<2 | byte(p.Uint(openflow.FieldIPECN))&3
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(seg)))
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // don't fragment
	ip[8] = byte(p.Uint(openflow.FieldIPTTL))
	if ip[8] == 0 {
		ip[8] = 64
	}
	ip[9] = proto
	copy(ip[12:], src)
	copy(ip[16:], dst)
	binary.BigEndian.PutUint16(ip[10:], checksum(ip))
	eth := make([]byte, 14, 14+len(ip)+len(seg))
	copy(eth[0:], p.Get(openflow.FieldEthDst))
	copy(eth[6:], p.Get(openflow.FieldEthSrc))
	binary.BigEndian.PutUint16(eth[12:], 0x0800)
	return append(append(eth, ip...), seg...), nil
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}
