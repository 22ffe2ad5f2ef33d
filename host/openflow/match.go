package openflow

import (
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
)

// MatchField is one field of a match, or the field and value of a
// set_field action. Value and Mask are big-endian and left-aligned: only
// the first Field.Size() bytes are used. A MatchField is a plain value
// (no pointers), so building flows does not allocate.
type MatchField struct {
	Field  Field
	Masked bool
	Value  [16]byte
	Mask   [16]byte
}

// Match is the set of fields a flow matches on. Order does not matter:
// the encoder writes fields in Field order (prerequisites first) and
// Normalize gives the canonical form that decoding returns.
type Match []MatchField

// Uint64 returns the value of a field up to 8 bytes wide.
func (m MatchField) Uint64() uint64 { return beUint(m.Value[:m.Field.Size()]) }

// MaskUint64 returns the mask (all ones when unmasked).
func (m MatchField) MaskUint64() uint64 {
	if !m.Masked {
		return ^uint64(0) >> (64 - 8*uint(min(m.Field.Size(), 8)))
	}
	return beUint(m.Mask[:m.Field.Size()])
}

// Addr returns the value of an IPv4/IPv6 field.
func (m MatchField) Addr() netip.Addr {
	if m.Field.Size() == 4 {
		return netip.AddrFrom4([4]byte(m.Value[:4]))
	}
	return netip.AddrFrom16(m.Value)
}

// MAC returns the value of an Ethernet address field.
func (m MatchField) MAC() net.HardwareAddr { return net.HardwareAddr(cloneBytes(m.Value[:6])) }

func beUint(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

func putBE(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte(v)
		v >>= 8
	}
}

// Exact matches a numeric field (up to 64 bits) exactly.
func Exact(f Field, v uint64) MatchField {
	m := MatchField{Field: f}
	putBE(m.Value[:min(f.Size(), 8)], v)
	return m
}

// Masked matches the bits of a numeric field (up to 64 bits) set in mask.
// A mask of all ones yields an exact match.
func Masked(f Field, v, mask uint64) MatchField {
	m := MatchField{Field: f, Masked: true}
	n := min(f.Size(), 8)
	putBE(m.Value[:n], v&mask)
	putBE(m.Mask[:n], mask)
	return m.normal()
}

// Bytes matches any field by raw big-endian value and optional mask
// (nil mask: exact). Wider fields (xxreg, ct_label, ipv6) use this or
// the typed helpers.
func Bytes(f Field, value, mask []byte) MatchField {
	m := MatchField{Field: f}
	copy(m.Value[:f.Size()], value)
	if mask != nil {
		m.Masked = true
		copy(m.Mask[:f.Size()], mask)
		for i := range f.Size() {
			m.Value[i] &= m.Mask[i]
		}
	}
	return m.normal()
}

// Uint128 matches a 128-bit field (xxreg0-3, ct_label) given as hi/lo
// halves, with a mask likewise (maskHi=maskLo=all ones for exact).
func Uint128(f Field, hi, lo, maskHi, maskLo uint64) MatchField {
	var v, mk [16]byte
	binary.BigEndian.PutUint64(v[:8], hi)
	binary.BigEndian.PutUint64(v[8:], lo)
	binary.BigEndian.PutUint64(mk[:8], maskHi)
	binary.BigEndian.PutUint64(mk[8:], maskLo)
	return Bytes(f, v[:], mk[:])
}

// normal turns an all-ones mask into an unmasked field, which is how OVS
// sends it back.
func (m MatchField) normal() MatchField {
	if !m.Masked {
		return m
	}
	for i := range m.Field.Size() {
		if m.Mask[i] != 0xff {
			return m
		}
	}
	m.Masked = false
	m.Mask = [16]byte{}
	return m
}

// Addr matches an IPv4/IPv6 field exactly (ip_src, arp_spa, tun_dst, …).
func Addr(f Field, a netip.Addr) MatchField {
	m := MatchField{Field: f}
	if f.Size() == 4 {
		a4 := a.Unmap().As4()
		copy(m.Value[:], a4[:])
	} else {
		m.Value = a.As16()
	}
	return m
}

// Prefix matches an IPv4/IPv6 field against a CIDR prefix.
func Prefix(f Field, p netip.Prefix) MatchField {
	m := Addr(f, p.Masked().Addr())
	n := f.Size()
	bits := p.Bits()
	if bits >= n*8 || bits < 0 {
		return m
	}
	m.Masked = true
	for i := range n {
		switch {
		case bits >= 8:
			m.Mask[i] = 0xff
			bits -= 8
		case bits > 0:
			m.Mask[i] = byte(0xff << (8 - bits))
			bits = 0
		}
	}
	return m
}

// MAC matches an Ethernet address field exactly.
func MAC(f Field, mac net.HardwareAddr) MatchField {
	m := MatchField{Field: f}
	copy(m.Value[:6], mac)
	return m
}

// MACMasked matches an Ethernet address field under a mask.
func MACMasked(f Field, mac, mask net.HardwareAddr) MatchField { return Bytes(f, mac, mask) }

// Convenience constructors for the fields flows use most.

// InPort matches the ingress OpenFlow port.
func InPort(port uint32) MatchField { return Exact(FieldInPort, uint64(port)) }

// EthType matches the Ethernet type (0x0800 IPv4, 0x86dd IPv6, 0x0806 ARP).
func EthType(t uint16) MatchField { return Exact(FieldEthType, uint64(t)) }

// IPProto matches the IP protocol (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6, 132 SCTP).
func IPProto(p uint8) MatchField { return Exact(FieldIPProto, uint64(p)) }

// Reg matches 32-bit register n (0-15) under mask.
func Reg(n int, v, mask uint32) MatchField {
	return Masked(FieldReg0+Field(n), uint64(v), uint64(mask))
}

// VLANID matches packets tagged with the given 12-bit VLAN ID.
func VLANID(vid uint16) MatchField { return Exact(FieldVLANVID, uint64(vid&0xfff|0x1000)) }

// CT state flags for CTState.
const (
	CTNew  uint32 = 0x01
	CTEst  uint32 = 0x02
	CTRel  uint32 = 0x04
	CTRpl  uint32 = 0x08
	CTInv  uint32 = 0x10
	CTTrk  uint32 = 0x20
	CTSNAT uint32 = 0x40
	CTDNAT uint32 = 0x80
)

// CTState matches conntrack state: bits in set must be 1, bits in clear
// must be 0, e.g. CTState(CTTrk|CTEst, CTNew) is "+est+trk-new" (OVS
// prints flags in bit order: "-new+est+trk").
func CTState(set, clear uint32) MatchField {
	return Masked(FieldCTState, uint64(set), uint64(set|clear))
}

// Normalize returns the match in canonical form: xxreg fields split into
// the 32-bit registers OVS reports, values ANDed with masks, fields
// sorted in encode order. Decoded matches are always normalised, so
// compare Normalize(built) with a decoded match.
func (m Match) Normalize() Match {
	out := make(Match, 0, len(m)+3)
	for _, f := range m {
		if f.Field >= FieldXXReg0 && f.Field <= FieldXXReg3 {
			base := FieldReg0 + 4*(f.Field-FieldXXReg0)
			for i := range 4 {
				var v, mk [16]byte
				copy(v[:4], f.Value[4*i:])
				if f.Masked {
					copy(mk[:4], f.Mask[4*i:])
				} else {
					copy(mk[:4], []byte{0xff, 0xff, 0xff, 0xff})
				}
				if mk[0]|mk[1]|mk[2]|mk[3] == 0 {
					continue
				}
				out = append(out, Bytes(base+Field(i), v[:4], mk[:4]))
			}
			continue
		}
		if f.Masked {
			f = Bytes(f.Field, f.Value[:f.Field.Size()], f.Mask[:f.Field.Size()])
		}
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b MatchField) int { return int(a.Field) - int(b.Field) })
	return out
}

// find returns the field f in m, or nil.
func (m Match) find(f Field) *MatchField {
	for i := range m {
		if m[i].Field == f {
			return &m[i]
		}
	}
	return nil
}

// Validate checks that every field is known, masks are only used where
// OVS allows them, no field repeats, and prerequisites (eth_type,
// ip_proto) are present. The switch would reject such a match with a
// less helpful error.
func (m Match) Validate() error {
	// One pass to find the prerequisite fields, one to check each field;
	// the encoder runs this for every flow mod, so it must stay cheap.
	var et, proto, ct *MatchField
	var seen [numFields/8 + 1]uint8
	for i := range m {
		f := m[i].Field
		if !f.valid() {
			return encodeError("match", "unknown field %d", f)
		}
		if seen[f/8]&(1<<(f%8)) != 0 {
			return encodeError("match", "field %s appears twice", f)
		}
		seen[f/8] |= 1 << (f % 8)
		switch f {
		case FieldEthType:
			et = &m[i]
		case FieldIPProto:
			proto = &m[i]
		case FieldCTState:
			ct = &m[i]
		}
	}
	for i := range m {
		f := &m[i]
		fi := &fields[f.Field]
		if f.Masked && !fi.maskable {
			return encodeError("match", "field %s cannot be masked in OVS; match it exactly", fi.name)
		}
		if f.Field >= FieldCTNwProto && f.Field <= FieldCTTpDst {
			if ct == nil || ct.Uint64()&uint64(CTTrk) == 0 || ct.MaskUint64()&uint64(CTInv) == 0 || ct.Uint64()&uint64(CTInv) != 0 {
				return encodeError("match", "field %s needs ct_state=-inv+trk in the match", fi.name)
			}
		}
		if fi.ethType != 0 {
			if et == nil || !(uint16(et.Uint64()) == fi.ethType || fi.ethType2 != 0 && uint16(et.Uint64()) == fi.ethType2) {
				return encodeError("match", "field %s needs eth_type=%#04x in the match", fi.name, fi.ethType)
			}
			if fi.proto != 0 && (proto == nil || uint8(proto.Uint64()) != fi.proto) {
				return encodeError("match", "field %s needs nw_proto=%d in the match", fi.name, fi.proto)
			}
		}
	}
	return nil
}

// appendOXM appends one OXM TLV.
func appendOXM(b []byte, f *MatchField) []byte {
	n := f.Field.Size()
	b = put32(b, f.Field.oxmHeader(f.Masked))
	b = append(b, f.Value[:n]...)
	if f.Masked {
		b = append(b, f.Mask[:n]...)
	}
	return b
}

// appendMatch appends an ofp_match (type OXM) with padding. Fields are
// written in Field order without allocating: a selection sort over at
// most len(m) entries, which is small for real flows.
func appendMatch(b []byte, m Match) []byte {
	start := len(b)
	b = put16(b, 1) // OFPMT_OXM
	b = put16(b, 0) // length, patched below
	last := FieldNone
	lastIdx := -1
	for range m {
		best := -1
		for i := range m {
			f := m[i].Field
			if f < last || (f == last && i <= lastIdx) {
				continue
			}
			if best < 0 || f < m[best].Field {
				best = i
			}
		}
		if best < 0 {
			break
		}
		b = appendOXM(b, &m[best])
		last, lastIdx = m[best].Field, best
	}
	setLen16(b, start+2, len(b)-start)
	return pad8(b, start)
}

// classPacketRegs is OpenFlow 1.5's OXM class for the 64-bit packet
// registers (OVS xreg0-7). OVS reports register matches in this form.
const classPacketRegs = 0x8001

// appendDecodedOXM decodes one OXM TLV and appends it to m; an xreg
// becomes the two 32-bit registers it spans.
func appendDecodedOXM(r *reader, m Match) (Match, bool) {
	if r.left() >= 4 && r.err == nil {
		h := uint32(r.b[r.off])<<24 | uint32(r.b[r.off+1])<<16 | uint32(r.b[r.off+2])<<8 | uint32(r.b[r.off+3])
		if h>>16 == classPacketRegs {
			r.off += 4
			code, masked, plen := int(h>>9&0x7f), h&(1<<8) != 0, int(h&0xff)
			if code >= 8 || (masked && plen != 16) || (!masked && plen != 8) {
				r.failf(ErrBadLength, fmtHeader(h))
				return m, false
			}
			v := r.bytes(plen)
			if r.err != nil {
				return m, false
			}
			for half := range 2 {
				var mk []byte
				if masked {
					mk = v[8+4*half : 12+4*half]
					if mk[0]|mk[1]|mk[2]|mk[3] == 0 {
						continue
					}
				}
				m = append(m, Bytes(FieldReg0+Field(2*code+half), v[4*half:4*half+4], mk))
			}
			return m, true
		}
	}
	f, ok := decodeOXM(r)
	if ok {
		m = append(m, f)
	}
	return m, ok
}

// decodeOXM decodes one OXM TLV at r.
func decodeOXM(r *reader) (MatchField, bool) {
	h := r.u32()
	if r.err != nil {
		return MatchField{}, false
	}
	var exp bool
	if h>>16 == 0xffff { // experimenter OXM: skip the experimenter id
		r.u32()
		exp = true
	}
	f, masked, plen := fieldFromHeader(h)
	if exp {
		plen -= 4
	}
	payload := r.bytes(plen)
	if r.err != nil {
		return MatchField{}, false
	}
	if !f.valid() || exp {
		r.failf(ErrUnknownType, fmtHeader(h))
		return MatchField{}, false
	}
	n := f.Size()
	if (masked && plen != 2*n) || (!masked && plen != n) {
		r.failf(ErrBadLength, "field "+f.String())
		return MatchField{}, false
	}
	mf := MatchField{Field: f, Masked: masked}
	copy(mf.Value[:n], payload[:n])
	if masked {
		copy(mf.Mask[:n], payload[n:])
	}
	return mf, true
}

func fmtHeader(h uint32) string {
	const hexd = "0123456789abcdef"
	var s [10]byte
	s[0], s[1] = '0', 'x'
	for i := range 8 {
		s[2+i] = hexd[(h>>(28-4*uint(i)))&0xf]
	}
	return "OXM header " + string(s[:])
}

// decodeMatch decodes an ofp_match including its padding.
func decodeMatch(r *reader) (Match, error) {
	start := r.off
	typ := r.u16()
	length := int(r.u16())
	if r.err != nil {
		return nil, r.err
	}
	if typ != 1 {
		r.failf(ErrUnknownType, "match type (want OXM)")
		return nil, r.err
	}
	if length < 4 {
		r.failf(ErrBadLength, "match")
		return nil, r.err
	}
	sv := r.sub(length-4, "match")
	sub := &sv
	m := make(Match, 0, (length-4)/8)
	for sub.left() > 0 {
		var ok bool
		if m, ok = appendDecodedOXM(sub, m); !ok {
			break
		}
	}
	if sub.err != nil {
		return nil, sub.err
	}
	r.skip((8 - (r.off-start)%8) % 8)
	if r.err != nil {
		return nil, r.err
	}
	return m.normalizeDecoded(), nil
}

// normalizeDecoded is Normalize for freshly decoded fields, done in place
// when (as with OVS's replies) they are already sorted and hold no xxreg.
func (m Match) normalizeDecoded() Match {
	if len(m) == 0 {
		return nil
	}
	for i := range m {
		f := m[i].Field
		if f >= FieldXXReg0 && f <= FieldXXReg3 || i > 0 && m[i-1].Field > f {
			return m.Normalize()
		}
	}
	for i := range m {
		if m[i].Masked {
			n := m[i].Field.Size()
			for j := range n {
				m[i].Value[j] &= m[i].Mask[j]
			}
			m[i] = m[i].normal()
		}
	}
	return m
}
