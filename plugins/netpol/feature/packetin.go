package feature

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"switchyard.dev/switchyard/plugins/netpol/flows"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Packet is the part of a punted packet netpol reads: Ethernet, IPv4 and
// the transport ports.
type Packet struct {
	EthSrc, EthDst net.HardwareAddr
	Src, Dst       netip.Addr
	Proto          uint8
	SrcPort        uint16
	DstPort        uint16
	// TCP only.
	Seq, Ack   uint32
	Flags      uint8
	PayloadLen int
	// IP is the IPv4 packet from its header on (for ICMP quoting).
	IP []byte
}

// ErrNotIPv4 is returned by ParsePacket for what netpol does not answer.
var ErrNotIPv4 = errors.New("not an IPv4 packet")

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// ParsePacket decodes an Ethernet frame as far as netpol needs. The bytes
// come from the switch but originate in a pod, so every length is checked.
func ParsePacket(b []byte) (Packet, error) {
	var p Packet
	if len(b) < 14 {
		return p, fmt.Errorf("frame of %d bytes is shorter than an Ethernet header", len(b))
	}
	p.EthDst, p.EthSrc = net.HardwareAddr(b[0:6]), net.HardwareAddr(b[6:12])
	if binary.BigEndian.Uint16(b[12:14]) != 0x0800 {
		return p, ErrNotIPv4
	}
	ip := b[14:]
	if len(ip) < 20 || ip[0]>>4 != 4 {
		return p, fmt.Errorf("truncated or malformed IPv4 header")
	}
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if ihl < 20 || len(ip) < ihl || total < ihl {
		return p, fmt.Errorf("IPv4 header length %d / total %d does not fit %d bytes", ihl, total, len(ip))
	}
	p.IP = ip
	p.Proto = ip[9]
	p.Src, _ = netip.AddrFromSlice(ip[12:16])
	p.Dst, _ = netip.AddrFromSlice(ip[16:20])
	l4 := ip[ihl:]
	switch p.Proto {
	case flow.ProtoTCP:
		if len(l4) < 20 {
			return p, fmt.Errorf("truncated TCP header")
		}
		p.SrcPort, p.DstPort = binary.BigEndian.Uint16(l4[0:2]), binary.BigEndian.Uint16(l4[2:4])
		p.Seq, p.Ack = binary.BigEndian.Uint32(l4[4:8]), binary.BigEndian.Uint32(l4[8:12])
		off := int(l4[12]>>4) * 4
		p.Flags = l4[13]
		if off < 20 {
			return p, fmt.Errorf("TCP data offset %d is below 20", off)
		}
		p.PayloadLen = max(total-ihl-off, 0)
	case flow.ProtoUDP, flow.ProtoSCTP:
		if len(l4) < 4 {
			return p, fmt.Errorf("truncated transport header")
		}
		p.SrcPort, p.DstPort = binary.BigEndian.Uint16(l4[0:2]), binary.BigEndian.Uint16(l4[2:4])
	}
	return p, nil
}

func checksum(b []byte, sum uint32) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func ipv4Header(src, dst netip.Addr, proto uint8, payload int) []byte {
	h := make([]byte, 20)
	h[0], h[8], h[9] = 0x45, 64, proto
	binary.BigEndian.PutUint16(h[2:], uint16(20+payload))
	s, d := src.As4(), dst.As4()
	copy(h[12:], s[:])
	copy(h[16:], d[:])
	binary.BigEndian.PutUint16(h[10:], checksum(h, 0))
	return h
}

// RejectReply builds the answer to a rejected packet as if the server
// sent it: a TCP RST for TCP, ICMP destination unreachable
// (administratively prohibited, type 3 code 13) for anything else.
// gw is the gateway MAC the reply is addressed to, so the node routes it
// back to the client.
func RejectReply(p Packet, gw net.HardwareAddr) []byte {
	var l4 []byte
	var proto uint8
	if p.Proto == flow.ProtoTCP {
		if p.Flags&tcpRST != 0 {
			return nil // never answer a reset
		}
		proto = flow.ProtoTCP
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], p.DstPort)
		binary.BigEndian.PutUint16(l4[2:], p.SrcPort)
		l4[12] = 5 << 4
		if p.Flags&tcpACK != 0 {
			binary.BigEndian.PutUint32(l4[4:], p.Ack)
			l4[13] = tcpRST
		} else {
			ack := p.Seq + uint32(p.PayloadLen)
			if p.Flags&tcpSYN != 0 {
				ack++
			}
			if p.Flags&tcpFIN != 0 {
				ack++
			}
			binary.BigEndian.PutUint32(l4[8:], ack)
			l4[13] = tcpRST | tcpACK
		}
		// Pseudo-header sum.
		s, d := p.Dst.As4(), p.Src.As4()
		var sum uint32
		for i := 0; i < 4; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(s[i:])) + uint32(binary.BigEndian.Uint16(d[i:]))
		}
		sum += uint32(flow.ProtoTCP) + uint32(len(l4))
		binary.BigEndian.PutUint16(l4[16:], checksum(l4, sum))
	} else {
		proto = flow.ProtoICMP
		ihl := int(p.IP[0]&0x0f) * 4
		quote := p.IP[:min(len(p.IP), ihl+8)]
		l4 = make([]byte, 8+len(quote))
		l4[0], l4[1] = 3, 13
		copy(l4[8:], quote)
		binary.BigEndian.PutUint16(l4[2:], checksum(l4, 0))
	}
	frame := make([]byte, 0, 14+20+len(l4))
	frame = append(frame, gw...)
	frame = append(frame, gw...)
	frame = append(frame, 0x08, 0x00)
	frame = append(frame, ipv4Header(p.Dst, p.Src, proto, len(l4))...)
	return append(frame, l4...)
}

// Decision is one line of the decision log.
type Decision struct {
	Time      time.Time `json:"time"`
	Policy    string    `json:"policy"`
	PolicyUID string    `json:"policyUID"`
	Rule      string    `json:"rule"`
	Direction string    `json:"direction"`
	Action    string    `json:"action"`
	Proto     uint8     `json:"proto"`
	Src       string    `json:"src"`
	SrcPort   uint16    `json:"srcPort"`
	Dst       string    `json:"dst"`
	DstPort   uint16    `json:"dstPort"`
}

// PacketIn logs a packet of a logged rule and answers a rejected one.
func (p *Netpol) PacketIn(ctx context.Context, req sdk.PacketInRequest, _ *sdk.PacketInResponse) error {
	kind, tag, dir, err := flows.ParseUserdata(req.Userdata)
	if err != nil {
		return err
	}
	p.mu.Lock()
	rule := p.rules[tag]
	p.mu.Unlock()
	if rule == nil {
		return nil // the rule went away since the packet was punted
	}
	pkt, err := ParsePacket(req.Data)
	if err != nil {
		p.log.Debug("punted packet not understood", "policy", rule.Policy, "rule", rule.Name, "error", err)
		return nil
	}
	if kind == flows.UserdataLog || rule.Logging {
		p.logDecision(rule, pkt)
	}
	if kind != flows.UserdataReject {
		return nil
	}
	// Egress: the packet has not been routed yet, so its destination MAC is
	// the gateway's; ingress: it was routed, and its source MAC is.
	gw := pkt.EthDst
	if dir == flows.Ingress {
		gw = pkt.EthSrc
	}
	reply := RejectReply(pkt, gw)
	if reply == nil {
		return nil
	}
	return p.host.PacketOut(ctx, sdk.PacketOut{Actions: []flow.Action{flow.LoadField(flows.Bypass, 1)},
		ResumeTable: flows.RejectResume, Data: reply})
}

func (p *Netpol) logDecision(r *flows.Rule, pkt Packet) {
	b, _ := json.Marshal(Decision{Time: time.Now().UTC(), Policy: r.Policy, PolicyUID: r.PolicyUID, Rule: r.Name,
		Direction: r.Direction.String(), Action: r.Action, Proto: pkt.Proto,
		Src: pkt.Src.String(), SrcPort: pkt.SrcPort, Dst: pkt.Dst.String(), DstPort: pkt.DstPort})
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.decisions != nil {
		p.decisions.Write(append(b, '\n'))
	}
}
