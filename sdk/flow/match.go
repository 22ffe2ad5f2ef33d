package flow

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// MatchKind identifies one match field. The order of the constants is the
// canonical order in which fields are printed and compared.
type MatchKind uint8

const (
	MatchInPort MatchKind = iota + 1
	MatchEthSrc
	MatchEthDst
	MatchEthType
	MatchVlanVID
	MatchIPProto
	MatchIPv4Src
	MatchIPv4Dst
	MatchIPv6Src
	MatchIPv6Dst
	MatchTCPSrc
	MatchTCPDst
	MatchUDPSrc
	MatchUDPDst
	MatchICMPType
	MatchICMPCode
	MatchARPOp
	MatchARPSpa
	MatchARPTpa
	MatchARPSha
	MatchARPTha
	MatchCTState
	MatchCTZone
	MatchCTMark
	MatchTunID
	MatchTunDst
	MatchMetadata
	MatchRegField
	// MatchConjID matches the conjunction ID of a completed conjunctive
	// match (see Conjunction). Kinds after it were added later, at the
	// end, so earlier kinds keep their wire numbers.
	MatchConjID
	MatchSCTPSrc
	MatchSCTPDst
	MatchTCPFlags
	MatchICMPv6Type
	MatchICMPv6Code
	MatchNDTarget
	MatchNDSLL
	MatchNDTLL
	MatchCTLabel
	MatchCTNwSrc
	MatchCTNwDst
	MatchCTIPv6Src
	MatchCTIPv6Dst
	MatchCTTpSrc
	MatchCTTpDst
	MatchCTNwProto
	MatchPktMark
	MatchTunSrc
	MatchTunIPv6Src
	MatchTunIPv6Dst
	MatchIPDSCP
	MatchIPECN
	numMatchKinds
)

type kindInfo struct {
	name string // field name in match text (ovs-ofctl's, e.g. "dl_src")
	size int    // value length in bytes
	// of is the ovs-fields(7) name set_field and learn print ("eth_src");
	// "" when it equals name.
	of string
	// nxm is the name in subfield syntax ("NXM_OF_ETH_SRC"); "" when the
	// field cannot be an Operand of move or learn.
	nxm      string
	writable bool // may be a move/learn-load destination
	dec      bool // values print in decimal
	// label is the name ovs-ofctl prints in a match when it differs
	// from name (sctp_src prints as tp_src).
	label string
}

var matchKinds = [numMatchKinds]kindInfo{
	MatchInPort:     {name: "in_port", size: 4, dec: true},
	MatchEthSrc:     {name: "dl_src", size: 6, of: "eth_src", nxm: "NXM_OF_ETH_SRC", writable: true},
	MatchEthDst:     {name: "dl_dst", size: 6, of: "eth_dst", nxm: "NXM_OF_ETH_DST", writable: true},
	MatchEthType:    {name: "dl_type", size: 2, of: "eth_type", nxm: "NXM_OF_ETH_TYPE"},
	MatchVlanVID:    {name: "dl_vlan", size: 2, of: "vlan_vid", dec: true},
	MatchIPProto:    {name: "nw_proto", size: 1, nxm: "NXM_OF_IP_PROTO", dec: true},
	MatchIPv4Src:    {name: "nw_src", size: 4, of: "ip_src", nxm: "NXM_OF_IP_SRC", writable: true},
	MatchIPv4Dst:    {name: "nw_dst", size: 4, of: "ip_dst", nxm: "NXM_OF_IP_DST", writable: true},
	MatchIPv6Src:    {name: "ipv6_src", size: 16, nxm: "NXM_NX_IPV6_SRC", writable: true},
	MatchIPv6Dst:    {name: "ipv6_dst", size: 16, nxm: "NXM_NX_IPV6_DST", writable: true},
	MatchTCPSrc:     {name: "tcp_src", label: "tp_src", size: 2, nxm: "NXM_OF_TCP_SRC", writable: true, dec: true},
	MatchTCPDst:     {name: "tcp_dst", label: "tp_dst", size: 2, nxm: "NXM_OF_TCP_DST", writable: true, dec: true},
	MatchUDPSrc:     {name: "udp_src", label: "tp_src", size: 2, nxm: "NXM_OF_UDP_SRC", writable: true, dec: true},
	MatchUDPDst:     {name: "udp_dst", label: "tp_dst", size: 2, nxm: "NXM_OF_UDP_DST", writable: true, dec: true},
	MatchICMPType:   {name: "icmp_type", size: 1, nxm: "NXM_OF_ICMP_TYPE", writable: true, dec: true},
	MatchICMPCode:   {name: "icmp_code", size: 1, nxm: "NXM_OF_ICMP_CODE", writable: true, dec: true},
	MatchARPOp:      {name: "arp_op", size: 2, nxm: "NXM_OF_ARP_OP", writable: true, dec: true},
	MatchARPSpa:     {name: "arp_spa", size: 4, nxm: "NXM_OF_ARP_SPA", writable: true},
	MatchARPTpa:     {name: "arp_tpa", size: 4, nxm: "NXM_OF_ARP_TPA", writable: true},
	MatchARPSha:     {name: "arp_sha", size: 6, nxm: "NXM_NX_ARP_SHA", writable: true},
	MatchARPTha:     {name: "arp_tha", size: 6, nxm: "NXM_NX_ARP_THA", writable: true},
	MatchCTState:    {name: "ct_state", size: 4, nxm: "NXM_NX_CT_STATE"},
	MatchCTZone:     {name: "ct_zone", size: 2, nxm: "NXM_NX_CT_ZONE", dec: true},
	MatchCTMark:     {name: "ct_mark", size: 4, nxm: "NXM_NX_CT_MARK"},
	MatchTunID:      {name: "tun_id", size: 8, nxm: "NXM_NX_TUN_ID", writable: true},
	MatchTunDst:     {name: "tun_dst", size: 4, nxm: "NXM_NX_TUN_IPV4_DST", writable: true},
	MatchMetadata:   {name: "metadata", size: 8, nxm: "OXM_OF_METADATA", writable: true},
	MatchRegField:   {name: "reg", size: 4},
	MatchConjID:     {name: "conj_id", size: 4, dec: true},
	MatchSCTPSrc:    {name: "sctp_src", label: "tp_src", size: 2, nxm: "OXM_OF_SCTP_SRC", writable: true, dec: true},
	MatchSCTPDst:    {name: "sctp_dst", label: "tp_dst", size: 2, nxm: "OXM_OF_SCTP_DST", writable: true, dec: true},
	MatchTCPFlags:   {name: "tcp_flags", size: 2, nxm: "NXM_NX_TCP_FLAGS"},
	MatchICMPv6Type: {name: "icmpv6_type", label: "icmp_type", size: 1, nxm: "NXM_NX_ICMPV6_TYPE", writable: true, dec: true},
	MatchICMPv6Code: {name: "icmpv6_code", label: "icmp_code", size: 1, nxm: "NXM_NX_ICMPV6_CODE", writable: true, dec: true},
	MatchNDTarget:   {name: "nd_target", size: 16, nxm: "NXM_NX_ND_TARGET", writable: true},
	MatchNDSLL:      {name: "nd_sll", size: 6, nxm: "NXM_NX_ND_SLL", writable: true},
	MatchNDTLL:      {name: "nd_tll", size: 6, nxm: "NXM_NX_ND_TLL", writable: true},
	MatchCTLabel:    {name: "ct_label", size: 16, nxm: "NXM_NX_CT_LABEL"},
	MatchCTNwSrc:    {name: "ct_nw_src", size: 4, nxm: "NXM_NX_CT_NW_SRC"},
	MatchCTNwDst:    {name: "ct_nw_dst", size: 4, nxm: "NXM_NX_CT_NW_DST"},
	MatchCTIPv6Src:  {name: "ct_ipv6_src", size: 16, nxm: "NXM_NX_CT_IPV6_SRC"},
	MatchCTIPv6Dst:  {name: "ct_ipv6_dst", size: 16, nxm: "NXM_NX_CT_IPV6_DST"},
	MatchCTTpSrc:    {name: "ct_tp_src", size: 2, nxm: "NXM_NX_CT_TP_SRC", dec: true},
	MatchCTTpDst:    {name: "ct_tp_dst", size: 2, nxm: "NXM_NX_CT_TP_DST", dec: true},
	MatchCTNwProto:  {name: "ct_nw_proto", size: 1, nxm: "NXM_NX_CT_NW_PROTO", dec: true},
	MatchPktMark:    {name: "pkt_mark", size: 4, nxm: "NXM_NX_PKT_MARK", writable: true},
	MatchTunSrc:     {name: "tun_src", size: 4, nxm: "NXM_NX_TUN_IPV4_SRC", writable: true},
	MatchTunIPv6Src: {name: "tun_ipv6_src", size: 16, nxm: "NXM_NX_TUN_IPV6_SRC", writable: true},
	MatchTunIPv6Dst: {name: "tun_ipv6_dst", size: 16, nxm: "NXM_NX_TUN_IPV6_DST", writable: true},
	MatchIPDSCP:     {name: "ip_dscp", label: "nw_tos", size: 1, dec: true},
	MatchIPECN:      {name: "nw_ecn", size: 1, dec: true},
}

func (k *kindInfo) setName() string {
	if k.of != "" {
		return k.of
	}
	return k.name
}

func (k *kindInfo) matchLabel() string {
	if k.label != "" {
		return k.label
	}
	return k.name
}

// Valid reports whether k is a known match kind.
func (k MatchKind) Valid() bool { return k > 0 && k < numMatchKinds }

// Size is the length in bytes of a value of this kind.
func (k MatchKind) Size() int {
	if !k.Valid() {
		return 0
	}
	return matchKinds[k].size
}

func (k MatchKind) String() string {
	if !k.Valid() {
		return fmt.Sprintf("match(%d)", uint8(k))
	}
	return matchKinds[k].name
}

// MatchField is one field of a match. Value and Mask are big-endian and
// exactly Kind.Size() bytes long; a nil Mask means an exact match. Use the
// Match builder methods rather than filling this in by hand.
type MatchField struct {
	Kind  MatchKind
	Field Field // only for MatchRegField
	Value []byte
	Mask  []byte
}

// Connection-tracking state bits for Match.CTState (as in OVS ct_state).
const (
	CTNew         uint32 = 1 << 0
	CTEstablished uint32 = 1 << 1
	CTRelated     uint32 = 1 << 2
	CTReply       uint32 = 1 << 3
	CTInvalid     uint32 = 1 << 4
	CTTracked     uint32 = 1 << 5
	CTSNAT        uint32 = 1 << 6
	CTDNAT        uint32 = 1 << 7
)

// Well-known EtherTypes and IP protocols.
const (
	EthTypeIPv4 uint16 = 0x0800
	EthTypeARP  uint16 = 0x0806
	EthTypeIPv6 uint16 = 0x86dd
	ProtoICMP   uint8  = 1
	ProtoTCP    uint8  = 6
	ProtoUDP    uint8  = 17
	ProtoICMPv6 uint8  = 58
	ProtoSCTP   uint8  = 132
)

// Match is an immutable set of match fields built by chaining:
//
//	m := flow.Match{}.InPort(3).IPv4().IPv4Src(netip.MustParsePrefix("10.0.0.0/24"))
//
// Each method returns a new Match; the receiver is never changed, so a
// common prefix can be shared. Setting a kind twice keeps the last value.
type Match struct {
	fields []MatchField
}

// MatchOf builds a Match from raw fields (used by wire conversions).
//
// Fields already in canonical order without repeats (as the wire carries
// them) are taken as they are, without copying; anything else is sorted
// and de-duplicated (last one wins).
func MatchOf(fields ...MatchField) Match {
	if len(fields) == 0 {
		return Match{}
	}
	sorted := true
	for i := 1; i < len(fields); i++ {
		if compareFields(fields[i-1], fields[i]) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return Match{fields: fields}
	}
	// Sort a copy (stable, so repeats keep their order) and keep the last
	// of each kind: O(n log n) however many fields a peer sends.
	out := slices.Clone(fields)
	slices.SortStableFunc(out, compareFields)
	w := 0
	for i := range out {
		if w > 0 && compareFields(out[w-1], out[i]) == 0 {
			out[w-1] = out[i]
			continue
		}
		out[w] = out[i]
		w++
	}
	return Match{fields: out[:w:w]}
}

// Fields returns the fields in canonical order. The slice must not be changed.
func (m Match) Fields() []MatchField { return m.fields }

// Len is the number of fields.
func (m Match) Len() int { return len(m.fields) }

// Get returns the field of kind k (and, for register fields, the named field).
func (m Match) Get(k MatchKind, regName string) (MatchField, bool) {
	for _, f := range m.fields {
		if f.Kind == k && (k != MatchRegField || f.Field.Name == regName) {
			return f, true
		}
	}
	return MatchField{}, false
}

func compareFields(a, b MatchField) int {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	return cmp.Compare(a.Field.Name, b.Field.Name)
}

func (m Match) with(f MatchField) Match {
	out := make([]MatchField, 0, len(m.fields)+1)
	replaced := false
	for _, g := range m.fields {
		if compareFields(g, f) == 0 {
			out = append(out, f)
			replaced = true
			continue
		}
		out = append(out, g)
	}
	if !replaced {
		out = append(out, f)
		slices.SortFunc(out, compareFields)
	}
	return Match{fields: out}
}

func be(n int, v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b[8-n:]
}

func (m Match) exact(k MatchKind, v uint64) Match {
	return m.with(MatchField{Kind: k, Value: be(k.Size(), v)})
}

func (m Match) masked(k MatchKind, v, mask uint64) Match {
	full := uint64(1)<<(8*k.Size()) - 1
	if k.Size() == 8 {
		full = ^uint64(0)
	}
	if mask&full == full {
		return m.exact(k, v)
	}
	return m.with(MatchField{Kind: k, Value: be(k.Size(), v&mask), Mask: be(k.Size(), mask)})
}

func (m Match) prefix(k MatchKind, p netip.Prefix) Match {
	p = p.Masked()
	addr := p.Addr().AsSlice()
	if p.Bits() == len(addr)*8 {
		return m.with(MatchField{Kind: k, Value: addr})
	}
	mask := net.CIDRMask(p.Bits(), len(addr)*8)
	return m.with(MatchField{Kind: k, Value: addr, Mask: []byte(mask)})
}

func (m Match) mac(k MatchKind, mac net.HardwareAddr, mask net.HardwareAddr) Match {
	f := MatchField{Kind: k, Value: slices.Clone([]byte(mac))}
	if mask != nil {
		f.Mask = slices.Clone([]byte(mask))
		for i := range f.Value {
			f.Value[i] &= f.Mask[i]
		}
	}
	return m.with(f)
}

func (m Match) InPort(port uint32) Match          { return m.exact(MatchInPort, uint64(port)) }
func (m Match) EthSrc(mac net.HardwareAddr) Match { return m.mac(MatchEthSrc, mac, nil) }
func (m Match) EthDst(mac net.HardwareAddr) Match { return m.mac(MatchEthDst, mac, nil) }

// EthDstMasked matches destination MAC bits under mask (e.g. the multicast bit).
func (m Match) EthDstMasked(mac, mask net.HardwareAddr) Match { return m.mac(MatchEthDst, mac, mask) }
func (m Match) EthType(t uint16) Match                        { return m.exact(MatchEthType, uint64(t)) }

// IPv4, IPv6 and ARP set the EtherType.
func (m Match) IPv4() Match { return m.EthType(EthTypeIPv4) }
func (m Match) IPv6() Match { return m.EthType(EthTypeIPv6) }
func (m Match) ARP() Match  { return m.EthType(EthTypeARP) }

// IPVersion selects IPv4 or IPv6 for the protocol shorthands.
type IPVersion uint8

const (
	V4 IPVersion = 4
	V6 IPVersion = 6
)

// IP sets the EtherType of IP version v.
func (m Match) IP(v IPVersion) Match {
	if v == V6 {
		return m.IPv6()
	}
	return m.IPv4()
}

// L4 sets the EtherType of IP version v and the IP protocol.
func (m Match) L4(v IPVersion, proto uint8) Match { return m.IP(v).IPProto(proto) }

// TCP4, TCP6, UDP4, UDP6, SCTP4 and SCTP6 set the EtherType and the IP
// protocol; ICMP4 is ICMP over IPv4 and ICMP6 ICMPv6 over IPv6.
func (m Match) TCP4() Match  { return m.L4(V4, ProtoTCP) }
func (m Match) TCP6() Match  { return m.L4(V6, ProtoTCP) }
func (m Match) UDP4() Match  { return m.L4(V4, ProtoUDP) }
func (m Match) UDP6() Match  { return m.L4(V6, ProtoUDP) }
func (m Match) SCTP4() Match { return m.L4(V4, ProtoSCTP) }
func (m Match) SCTP6() Match { return m.L4(V6, ProtoSCTP) }
func (m Match) ICMP4() Match { return m.L4(V4, ProtoICMP) }
func (m Match) ICMP6() Match { return m.L4(V6, ProtoICMPv6) }

// TCP matches TCP over IPv4 only.
//
// Deprecated: the name hides the IP version. Use TCP4 (the same match) or
// TCP6, or L4(v, ProtoTCP) for either.
func (m Match) TCP() Match { return m.TCP4() }

// UDP matches UDP over IPv4 only.
//
// Deprecated: use UDP4 (the same match) or UDP6.
func (m Match) UDP() Match { return m.UDP4() }

// ICMP matches ICMP over IPv4 only.
//
// Deprecated: use ICMP4 (the same match) or ICMP6.
func (m Match) ICMP() Match { return m.ICMP4() }

func (m Match) VlanVID(vid uint16) Match   { return m.exact(MatchVlanVID, uint64(vid)) }
func (m Match) IPProto(p uint8) Match      { return m.exact(MatchIPProto, uint64(p)) }
func (m Match) IPv4Src(a netip.Addr) Match { return m.prefix(MatchIPv4Src, netip.PrefixFrom(a, 32)) }
func (m Match) IPv4Dst(a netip.Addr) Match { return m.prefix(MatchIPv4Dst, netip.PrefixFrom(a, 32)) }
func (m Match) IPv4SrcPrefix(p netip.Prefix) Match {
	return m.prefix(MatchIPv4Src, p)
}
func (m Match) IPv4DstPrefix(p netip.Prefix) Match {
	return m.prefix(MatchIPv4Dst, p)
}
func (m Match) IPv6Src(a netip.Addr) Match         { return m.prefix(MatchIPv6Src, netip.PrefixFrom(a, 128)) }
func (m Match) IPv6Dst(a netip.Addr) Match         { return m.prefix(MatchIPv6Dst, netip.PrefixFrom(a, 128)) }
func (m Match) IPv6SrcPrefix(p netip.Prefix) Match { return m.prefix(MatchIPv6Src, p) }
func (m Match) IPv6DstPrefix(p netip.Prefix) Match { return m.prefix(MatchIPv6Dst, p) }

// IPSrc and IPDst match the source or destination prefix in the field of
// the prefix's family (nw_src or ipv6_src), for dual-stack callers. They
// do not set the EtherType.
func (m Match) IPSrc(p netip.Prefix) Match { return m.family(p, MatchIPv4Src, MatchIPv6Src) }
func (m Match) IPDst(p netip.Prefix) Match { return m.family(p, MatchIPv4Dst, MatchIPv6Dst) }

func (m Match) family(p netip.Prefix, v4, v6 MatchKind) Match {
	if p.Addr().Is4() || p.Addr().Is4In6() {
		return m.prefix(v4, netip.PrefixFrom(p.Addr().Unmap(), min(p.Bits(), 32)))
	}
	return m.prefix(v6, p)
}

func (m Match) TCPSrc(port uint16) Match { return m.exact(MatchTCPSrc, uint64(port)) }
func (m Match) TCPDst(port uint16) Match { return m.exact(MatchTCPDst, uint64(port)) }

// TCPDstMasked matches a port range expressed as value/mask.
func (m Match) TCPDstMasked(port, mask uint16) Match {
	return m.masked(MatchTCPDst, uint64(port), uint64(mask))
}
func (m Match) TCPSrcMasked(port, mask uint16) Match {
	return m.masked(MatchTCPSrc, uint64(port), uint64(mask))
}
func (m Match) UDPSrc(port uint16) Match { return m.exact(MatchUDPSrc, uint64(port)) }
func (m Match) UDPDst(port uint16) Match { return m.exact(MatchUDPDst, uint64(port)) }
func (m Match) UDPDstMasked(port, mask uint16) Match {
	return m.masked(MatchUDPDst, uint64(port), uint64(mask))
}
func (m Match) UDPSrcMasked(port, mask uint16) Match {
	return m.masked(MatchUDPSrc, uint64(port), uint64(mask))
}
func (m Match) SCTPSrc(port uint16) Match { return m.exact(MatchSCTPSrc, uint64(port)) }
func (m Match) SCTPDst(port uint16) Match { return m.exact(MatchSCTPDst, uint64(port)) }
func (m Match) SCTPSrcMasked(port, mask uint16) Match {
	return m.masked(MatchSCTPSrc, uint64(port), uint64(mask))
}
func (m Match) SCTPDstMasked(port, mask uint16) Match {
	return m.masked(MatchSCTPDst, uint64(port), uint64(mask))
}

// TCP flag bits for Match.TCPFlags.
const (
	TCPFin uint16 = 1 << iota
	TCPSyn
	TCPRst
	TCPPsh
	TCPAck
	TCPUrg
	TCPEce
	TCPCwr
	TCPNs
)

// TCPFlags matches the TCP flag bits under mask (12 bits), e.g.
// TCPFlags(TCPSyn, TCPSyn|TCPAck) for a connection's first packet.
func (m Match) TCPFlags(flags, mask uint16) Match {
	return m.with(MatchField{Kind: MatchTCPFlags, Value: be(2, uint64(flags&mask&0xfff)), Mask: be(2, uint64(mask&0xfff))})
}

func (m Match) ICMPType(t uint8) Match { return m.exact(MatchICMPType, uint64(t)) }
func (m Match) ICMPCode(c uint8) Match { return m.exact(MatchICMPCode, uint64(c)) }

// ICMPv6Type, ICMPv6Code and the ND fields need ICMP6().
func (m Match) ICMPv6Type(t uint8) Match         { return m.exact(MatchICMPv6Type, uint64(t)) }
func (m Match) ICMPv6Code(c uint8) Match         { return m.exact(MatchICMPv6Code, uint64(c)) }
func (m Match) NDTarget(a netip.Addr) Match      { return m.prefix(MatchNDTarget, netip.PrefixFrom(a, 128)) }
func (m Match) NDSLL(mac net.HardwareAddr) Match { return m.mac(MatchNDSLL, mac, nil) }
func (m Match) NDTLL(mac net.HardwareAddr) Match { return m.mac(MatchNDTLL, mac, nil) }
func (m Match) ARPOp(op uint16) Match            { return m.exact(MatchARPOp, uint64(op)) }

// IPDSCP matches the 6-bit DSCP; IPECN the 2-bit ECN field.
func (m Match) IPDSCP(dscp uint8) Match { return m.exact(MatchIPDSCP, uint64(dscp&0x3f)) }
func (m Match) IPECN(ecn uint8) Match   { return m.exact(MatchIPECN, uint64(ecn&3)) }

// ConjID matches packets for which every clause of conjunction id matched.
func (m Match) ConjID(id uint32) Match            { return m.exact(MatchConjID, uint64(id)) }
func (m Match) ARPSpa(a netip.Addr) Match         { return m.prefix(MatchARPSpa, netip.PrefixFrom(a, 32)) }
func (m Match) ARPTpa(a netip.Addr) Match         { return m.prefix(MatchARPTpa, netip.PrefixFrom(a, 32)) }
func (m Match) ARPSpaPrefix(p netip.Prefix) Match { return m.prefix(MatchARPSpa, p) }
func (m Match) ARPTpaPrefix(p netip.Prefix) Match { return m.prefix(MatchARPTpa, p) }
func (m Match) ARPSha(mac net.HardwareAddr) Match { return m.mac(MatchARPSha, mac, nil) }
func (m Match) ARPTha(mac net.HardwareAddr) Match { return m.mac(MatchARPTha, mac, nil) }
func (m Match) CTState(bits, mask uint32) Match {
	return m.masked(MatchCTState, uint64(bits), uint64(mask))
}
func (m Match) CTZone(z uint16) Match       { return m.exact(MatchCTZone, uint64(z)) }
func (m Match) CTMark(v, mask uint32) Match { return m.masked(MatchCTMark, uint64(v), uint64(mask)) }

// CTLabel matches the 128-bit ct_label under mask.
func (m Match) CTLabel(v, mask Uint128) Match {
	v = Uint128{v.Hi & mask.Hi, v.Lo & mask.Lo}
	f := MatchField{Kind: MatchCTLabel, Value: v.Bytes()}
	if mask != (Uint128{^uint64(0), ^uint64(0)}) {
		f.Mask = mask.Bytes()
	}
	return m.with(f)
}

// CTNwSrc and CTNwDst match the original-direction IPv4 addresses of the
// tracked connection (after ct(), before any NAT); CTIPv6Src and CTIPv6Dst
// are their IPv6 forms. CTTpSrc, CTTpDst and CTNwProto are its ports and
// protocol.
func (m Match) CTNwSrc(p netip.Prefix) Match   { return m.prefix(MatchCTNwSrc, p) }
func (m Match) CTNwDst(p netip.Prefix) Match   { return m.prefix(MatchCTNwDst, p) }
func (m Match) CTIPv6Src(p netip.Prefix) Match { return m.prefix(MatchCTIPv6Src, p) }
func (m Match) CTIPv6Dst(p netip.Prefix) Match { return m.prefix(MatchCTIPv6Dst, p) }
func (m Match) CTTpSrc(port uint16) Match      { return m.exact(MatchCTTpSrc, uint64(port)) }
func (m Match) CTTpDst(port uint16) Match      { return m.exact(MatchCTTpDst, uint64(port)) }
func (m Match) CTTpSrcMasked(port, mask uint16) Match {
	return m.masked(MatchCTTpSrc, uint64(port), uint64(mask))
}
func (m Match) CTTpDstMasked(port, mask uint16) Match {
	return m.masked(MatchCTTpDst, uint64(port), uint64(mask))
}
func (m Match) CTNwProto(p uint8) Match { return m.exact(MatchCTNwProto, uint64(p)) }

// PktMark matches the packet mark bits under mask.
func (m Match) PktMark(v, mask uint32) Match { return m.masked(MatchPktMark, uint64(v), uint64(mask)) }

func (m Match) TunID(id uint64) Match     { return m.exact(MatchTunID, id) }
func (m Match) TunDst(a netip.Addr) Match { return m.prefix(MatchTunDst, netip.PrefixFrom(a, 32)) }

// TunSrcPrefix and TunDstPrefix match the outer addresses of the tunnel
// a packet arrived through, in the field of the prefix's family (tun_src
// or tun_ipv6_src).
func (m Match) TunSrcPrefix(p netip.Prefix) Match { return m.family(p, MatchTunSrc, MatchTunIPv6Src) }
func (m Match) TunDstPrefix(p netip.Prefix) Match { return m.family(p, MatchTunDst, MatchTunIPv6Dst) }
func (m Match) Metadata(v, mask uint64) Match     { return m.masked(MatchMetadata, v, mask) }

// Field matches a whole named register field against v.
func (m Match) Field(f Field, v uint32) Match {
	return m.with(MatchField{Kind: MatchRegField, Field: f, Value: be(4, uint64(v))})
}

// FieldMasked matches the bits of v under mask, both relative to the field.
func (m Match) FieldMasked(f Field, v, mask uint32) Match {
	return m.with(MatchField{Kind: MatchRegField, Field: f, Value: be(4, uint64(v&mask)), Mask: be(4, uint64(mask))})
}

// Uint returns the value as an integer (fields up to 8 bytes).
func (f MatchField) Uint() uint64 { return beUint(f.Value) }

// MaskUint returns the mask as an integer, or all-ones when exact.
func (f MatchField) MaskUint() uint64 {
	if f.Mask == nil {
		if len(f.Value) >= 8 {
			return ^uint64(0)
		}
		return uint64(1)<<(8*len(f.Value)) - 1
	}
	return beUint(f.Mask)
}

func beUint(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// Validate checks sizes and kinds.
func (f MatchField) Validate() error {
	if !f.Kind.Valid() {
		return fmt.Errorf("unknown match field kind %d", f.Kind)
	}
	if len(f.Value) != f.Kind.Size() {
		return fmt.Errorf("match %s: value is %d bytes, want %d", f.Kind, len(f.Value), f.Kind.Size())
	}
	if f.Mask != nil && len(f.Mask) != len(f.Value) {
		return fmt.Errorf("match %s: mask is %d bytes, want %d", f.Kind, len(f.Mask), len(f.Value))
	}
	if f.Kind == MatchRegField {
		if err := f.Field.Validate(); err != nil {
			return fmt.Errorf("match on register field: %w", err)
		}
		if f.Field.Width < 32 && f.Uint()>>f.Field.Width != 0 {
			return fmt.Errorf("match field %q: value %#x does not fit in %d bits", f.Field.Name, f.Uint(), f.Field.Width)
		}
	}
	return nil
}

// String renders the field as ovs-ofctl would ("nw_src=10.0.0.0/24").
// Register fields print by name ("reg:pod_flag=0x1"); the host prints the
// resolved register instead.
func (f MatchField) String() string {
	name := f.Kind.String()
	if f.Kind.Valid() {
		name = matchKinds[f.Kind].matchLabel()
	}
	if f.Kind == MatchRegField {
		name = "reg:" + f.Field.Name
	}
	return name + "=" + f.valueString()
}

func (f MatchField) valueString() string {
	if !f.Kind.Valid() || len(f.Value) != f.Kind.Size() || (f.Mask != nil && len(f.Mask) != len(f.Value)) {
		return fmt.Sprintf("%x", f.Value)
	}
	switch f.Kind {
	case MatchEthSrc, MatchEthDst, MatchARPSha, MatchARPTha, MatchNDSLL, MatchNDTLL:
		s := net.HardwareAddr(f.Value).String()
		if f.Mask != nil {
			s += "/" + net.HardwareAddr(f.Mask).String()
		}
		return s
	case MatchIPv4Src, MatchIPv4Dst, MatchIPv6Src, MatchIPv6Dst, MatchARPSpa, MatchARPTpa, MatchTunDst,
		MatchNDTarget, MatchCTNwSrc, MatchCTNwDst, MatchCTIPv6Src, MatchCTIPv6Dst, MatchTunSrc, MatchTunIPv6Src, MatchTunIPv6Dst:
		a, _ := netip.AddrFromSlice(f.Value)
		if f.Mask == nil {
			return a.String()
		}
		ones, bits := net.IPMask(f.Mask).Size()
		if bits == 0 { // not a CIDR mask
			m, _ := netip.AddrFromSlice(f.Mask)
			return a.String() + "/" + m.String()
		}
		return netip.PrefixFrom(a, ones).String()
	case MatchInPort, MatchVlanVID, MatchIPProto, MatchTCPSrc, MatchTCPDst, MatchUDPSrc, MatchUDPDst,
		MatchICMPType, MatchICMPCode, MatchARPOp, MatchCTZone, MatchConjID,
		MatchSCTPSrc, MatchSCTPDst, MatchICMPv6Type, MatchICMPv6Code, MatchCTTpSrc, MatchCTTpDst, MatchCTNwProto, MatchIPECN:
		if f.Mask != nil {
			return fmt.Sprintf("%#x/%#x", f.Uint(), f.MaskUint())
		}
		return fmt.Sprintf("%d", f.Uint())
	case MatchIPDSCP:
		// ovs-ofctl prints the DSCP as the ToS byte it sits in.
		return fmt.Sprintf("%d", f.Uint()<<2)
	case MatchCTState:
		return ctStateString(uint32(f.Uint()), uint32(f.MaskUint()))
	case MatchTCPFlags:
		return tcpFlagsString(uint16(f.Uint()), uint16(f.MaskUint())&0xfff)
	case MatchCTLabel:
		s := Uint128From(f.Value).hex()
		if f.Mask != nil {
			s += "/" + Uint128From(f.Mask).hex()
		}
		return s
	default:
		if f.Mask != nil {
			return fmt.Sprintf("%#x/%#x", f.Uint(), f.MaskUint())
		}
		return fmt.Sprintf("%#x", f.Uint())
	}
}

// ovs-ofctl's protocol shorthands.
var (
	l4Short4 = map[uint64]string{uint64(ProtoTCP): "tcp", uint64(ProtoUDP): "udp", uint64(ProtoICMP): "icmp", uint64(ProtoSCTP): "sctp"}
	l4Short6 = map[uint64]string{uint64(ProtoTCP): "tcp6", uint64(ProtoUDP): "udp6", uint64(ProtoICMPv6): "icmp6", uint64(ProtoSCTP): "sctp6"}
)

var tcpFlagNames = []string{"fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]"}

// tcpFlagsString prints as OVS's format_flags_masked: "syn|ack" when every
// bit is matched, "+syn-ack" otherwise.
func tcpFlagsString(v, mask uint16) string {
	var b strings.Builder
	if mask == 0xfff {
		if v == 0 {
			return "0"
		}
		for i, n := range tcpFlagNames {
			if v&(1<<i) != 0 {
				if b.Len() > 0 {
					b.WriteByte('|')
				}
				b.WriteString(n)
			}
		}
		return b.String()
	}
	if mask == 0 {
		return "0/0"
	}
	for i, n := range tcpFlagNames {
		if mask&(1<<i) == 0 {
			continue
		}
		if v&(1<<i) != 0 {
			b.WriteByte('+')
		} else {
			b.WriteByte('-')
		}
		b.WriteString(n)
	}
	return b.String()
}

var ctBitNames = []string{"new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"}

func ctStateString(bits, mask uint32) string {
	var b strings.Builder
	for i, n := range ctBitNames {
		bit := uint32(1) << i
		if mask&bit == 0 {
			continue
		}
		if bits&bit != 0 {
			b.WriteString("+")
		} else {
			b.WriteString("-")
		}
		b.WriteString(n)
	}
	return b.String()
}

// String is the canonical text of the match, fields in canonical order,
// with ovs-ofctl's protocol shorthands (ip, tcp, arp, ...).
func (m Match) String() string {
	return m.Format(func(f MatchField) string { return f.String() })
}

// printOrder is the order in which ovs-ofctl prints match fields (OVS's
// match_format), so that a match's text is exactly the switch's. The
// EtherType/protocol shorthand ("tcp", "ipv6") sits at rankShort and all
// register fields at rankReg (ordered by register when resolved).
var printOrder = [numMatchKinds]uint8{
	MatchPktMark: 1, MatchConjID: 2, MatchCTState: 3, MatchCTZone: 4, MatchCTMark: 5, MatchCTLabel: 6,
	MatchCTNwSrc: 7, MatchCTIPv6Src: 8, MatchCTNwDst: 9, MatchCTIPv6Dst: 10, MatchCTNwProto: 11, MatchCTTpSrc: 12, MatchCTTpDst: 13,
	// rankShort = 14, rankReg = 15
	MatchRegField: rankReg,
	MatchTunID:    16, MatchTunSrc: 17, MatchTunDst: 18, MatchTunIPv6Src: 19, MatchTunIPv6Dst: 20, MatchMetadata: 21,
	MatchInPort: 22, MatchVlanVID: 23, MatchEthSrc: 24, MatchEthDst: 25, MatchEthType: 26,
	MatchIPv6Src: 27, MatchIPv6Dst: 28, MatchARPSpa: 29, MatchARPTpa: 30, MatchIPv4Src: 31, MatchIPv4Dst: 32,
	MatchIPProto: 33, MatchARPOp: 34, MatchARPSha: 35, MatchARPTha: 36, MatchIPDSCP: 37, MatchIPECN: 38,
	MatchICMPType: 39, MatchICMPv6Type: 39, MatchICMPCode: 40, MatchICMPv6Code: 40, MatchNDTarget: 41, MatchNDSLL: 42, MatchNDTLL: 43,
	MatchTCPSrc: 44, MatchUDPSrc: 44, MatchSCTPSrc: 44, MatchTCPDst: 45, MatchUDPDst: 45, MatchSCTPDst: 45,
	MatchTCPFlags: 46,
}

const (
	rankShort = 14
	rankReg   = 15
)

// Format renders the match with a custom printer for each field other than
// the EtherType/protocol shorthands, in ovs-ofctl's field order. The host
// uses it to print resolved register bits; a field printed as "" is left
// out (the host merges the fields of one register into one).
func (m Match) Format(field func(MatchField) string) string {
	type part struct {
		rank uint8
		text string
	}
	parts := make([]part, 0, len(m.fields)+1)
	short, skipType, skipProto := m.shorthand()
	if short != "" {
		parts = append(parts, part{rankShort, short})
	}
	for _, f := range m.fields {
		if (skipType && f.Kind == MatchEthType) || (skipProto && f.Kind == MatchIPProto) {
			continue
		}
		var rank uint8
		if f.Kind.Valid() {
			rank = printOrder[f.Kind]
		}
		if t := field(f); t != "" {
			parts = append(parts, part{rank, t})
		}
	}
	slices.SortStableFunc(parts, func(a, b part) int { return int(a.rank) - int(b.rank) })
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.text)
	}
	return b.String()
}

// shorthand is the EtherType/protocol shorthand ovs-ofctl prints ("ip",
// "tcp6"), and whether it stands for the EtherType and the protocol.
func (m Match) shorthand() (short string, skipType, skipProto bool) {
	var ethType, proto uint64
	hasEth, hasProto := false, false
	if f, ok := m.Get(MatchEthType, ""); ok {
		ethType, hasEth = f.Uint(), true
	}
	if f, ok := m.Get(MatchIPProto, ""); ok {
		proto, hasProto = f.Uint(), true
	}
	if hasEth && hasProto {
		switch {
		case ethType == uint64(EthTypeIPv4):
			short = l4Short4[proto]
		case ethType == uint64(EthTypeIPv6):
			short = l4Short6[proto]
		}
		skipProto = short != ""
	}
	if short == "" && hasEth {
		switch ethType {
		case uint64(EthTypeIPv4):
			short = "ip"
		case uint64(EthTypeIPv6):
			short = "ipv6"
		case uint64(EthTypeARP):
			short = "arp"
		}
	}
	return short, short != "", skipProto
}

// checkPrerequisites reports matches the switch would refuse for a
// missing prerequisite that only the SDK can name well: the conntrack
// tuple fields need a tracked, valid connection.
func (m Match) checkPrerequisites() error {
	for _, f := range m.fields {
		switch f.Kind {
		case MatchCTNwSrc, MatchCTNwDst, MatchCTIPv6Src, MatchCTIPv6Dst, MatchCTTpSrc, MatchCTTpDst, MatchCTNwProto:
			st, ok := m.Get(MatchCTState, "")
			bits, mask := uint32(st.Uint()), uint32(st.MaskUint())
			if !ok || bits&CTTracked == 0 || mask&CTInvalid == 0 || bits&CTInvalid != 0 {
				return fmt.Errorf("match on %s needs CTState(CTTracked, CTTracked|CTInvalid) (ct_state=+trk-inv) in the same match", f.Kind)
			}
		}
	}
	return nil
}
