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
	// match (see Conjunction). Kept last so earlier kinds keep their wire
	// numbers.
	MatchConjID
	numMatchKinds
)

type kindInfo struct {
	name string // ovs-ofctl field name
	size int    // value length in bytes
}

var matchKinds = [numMatchKinds]kindInfo{
	MatchInPort:   {"in_port", 4},
	MatchEthSrc:   {"dl_src", 6},
	MatchEthDst:   {"dl_dst", 6},
	MatchEthType:  {"dl_type", 2},
	MatchVlanVID:  {"dl_vlan", 2},
	MatchIPProto:  {"nw_proto", 1},
	MatchIPv4Src:  {"nw_src", 4},
	MatchIPv4Dst:  {"nw_dst", 4},
	MatchIPv6Src:  {"ipv6_src", 16},
	MatchIPv6Dst:  {"ipv6_dst", 16},
	MatchTCPSrc:   {"tcp_src", 2},
	MatchTCPDst:   {"tcp_dst", 2},
	MatchUDPSrc:   {"udp_src", 2},
	MatchUDPDst:   {"udp_dst", 2},
	MatchICMPType: {"icmp_type", 1},
	MatchICMPCode: {"icmp_code", 1},
	MatchARPOp:    {"arp_op", 2},
	MatchARPSpa:   {"arp_spa", 4},
	MatchARPTpa:   {"arp_tpa", 4},
	MatchARPSha:   {"arp_sha", 6},
	MatchARPTha:   {"arp_tha", 6},
	MatchCTState:  {"ct_state", 4},
	MatchCTZone:   {"ct_zone", 2},
	MatchCTMark:   {"ct_mark", 4},
	MatchTunID:    {"tun_id", 8},
	MatchTunDst:   {"tun_dst", 4},
	MatchMetadata: {"metadata", 8},
	MatchRegField: {"reg", 4},
	MatchConjID:   {"conj_id", 4},
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
	var m Match
	for _, f := range fields {
		m = m.with(f)
	}
	return m
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

// TCP, UDP and ICMP set the EtherType to IPv4 and the IP protocol.
func (m Match) TCP() Match                 { return m.IPv4().IPProto(ProtoTCP) }
func (m Match) UDP() Match                 { return m.IPv4().IPProto(ProtoUDP) }
func (m Match) ICMP() Match                { return m.IPv4().IPProto(ProtoICMP) }
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
func (m Match) IPv6SrcPrefix(p netip.Prefix) Match { return m.prefix(MatchIPv6Src, p) }
func (m Match) IPv6DstPrefix(p netip.Prefix) Match { return m.prefix(MatchIPv6Dst, p) }
func (m Match) TCPSrc(port uint16) Match           { return m.exact(MatchTCPSrc, uint64(port)) }
func (m Match) TCPDst(port uint16) Match           { return m.exact(MatchTCPDst, uint64(port)) }

// TCPDstMasked matches a port range expressed as value/mask.
func (m Match) TCPDstMasked(port, mask uint16) Match {
	return m.masked(MatchTCPDst, uint64(port), uint64(mask))
}
func (m Match) UDPSrc(port uint16) Match { return m.exact(MatchUDPSrc, uint64(port)) }
func (m Match) UDPDst(port uint16) Match { return m.exact(MatchUDPDst, uint64(port)) }
func (m Match) UDPDstMasked(port, mask uint16) Match {
	return m.masked(MatchUDPDst, uint64(port), uint64(mask))
}
func (m Match) ICMPType(t uint8) Match { return m.exact(MatchICMPType, uint64(t)) }
func (m Match) ICMPCode(c uint8) Match { return m.exact(MatchICMPCode, uint64(c)) }
func (m Match) ARPOp(op uint16) Match  { return m.exact(MatchARPOp, uint64(op)) }

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
func (m Match) CTZone(z uint16) Match         { return m.exact(MatchCTZone, uint64(z)) }
func (m Match) CTMark(v, mask uint32) Match   { return m.masked(MatchCTMark, uint64(v), uint64(mask)) }
func (m Match) TunID(id uint64) Match         { return m.exact(MatchTunID, id) }
func (m Match) TunDst(a netip.Addr) Match     { return m.prefix(MatchTunDst, netip.PrefixFrom(a, 32)) }
func (m Match) Metadata(v, mask uint64) Match { return m.masked(MatchMetadata, v, mask) }

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
	if f.Kind == MatchRegField {
		name = "reg:" + f.Field.Name
	}
	return name + "=" + f.valueString()
}

func (f MatchField) valueString() string {
	switch f.Kind {
	case MatchEthSrc, MatchEthDst, MatchARPSha, MatchARPTha:
		s := net.HardwareAddr(f.Value).String()
		if f.Mask != nil {
			s += "/" + net.HardwareAddr(f.Mask).String()
		}
		return s
	case MatchIPv4Src, MatchIPv4Dst, MatchIPv6Src, MatchIPv6Dst, MatchARPSpa, MatchARPTpa, MatchTunDst:
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
		MatchICMPType, MatchICMPCode, MatchARPOp, MatchCTZone, MatchConjID:
		if f.Mask != nil {
			return fmt.Sprintf("%#x/%#x", f.Uint(), f.MaskUint())
		}
		return fmt.Sprintf("%d", f.Uint())
	case MatchCTState:
		return ctStateString(uint32(f.Uint()), uint32(f.MaskUint()))
	default:
		if f.Mask != nil {
			return fmt.Sprintf("%#x/%#x", f.Uint(), f.MaskUint())
		}
		return fmt.Sprintf("%#x", f.Uint())
	}
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

// Format renders the match with a custom printer for each field other than
// the EtherType/protocol shorthands. The host uses it to print resolved
// register bits.
func (m Match) Format(field func(MatchField) string) string {
	var parts []string
	var ethType, proto uint64
	hasEth, hasProto := false, false
	if f, ok := m.Get(MatchEthType, ""); ok {
		ethType, hasEth = f.Uint(), true
	}
	if f, ok := m.Get(MatchIPProto, ""); ok {
		proto, hasProto = f.Uint(), true
	}
	short := ""
	switch {
	case hasEth && ethType == uint64(EthTypeIPv4) && hasProto && proto == uint64(ProtoTCP):
		short = "tcp"
	case hasEth && ethType == uint64(EthTypeIPv4) && hasProto && proto == uint64(ProtoUDP):
		short = "udp"
	case hasEth && ethType == uint64(EthTypeIPv4) && hasProto && proto == uint64(ProtoICMP):
		short = "icmp"
	case hasEth && ethType == uint64(EthTypeIPv4):
		short = "ip"
	case hasEth && ethType == uint64(EthTypeIPv6):
		short = "ipv6"
	case hasEth && ethType == uint64(EthTypeARP):
		short = "arp"
	}
	if short != "" {
		parts = append(parts, short)
	}
	for _, f := range m.fields {
		if short != "" && f.Kind == MatchEthType {
			continue
		}
		if (short == "tcp" || short == "udp" || short == "icmp") && f.Kind == MatchIPProto {
			continue
		}
		parts = append(parts, field(f))
	}
	return strings.Join(parts, ",")
}
