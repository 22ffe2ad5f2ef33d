package openflow

import (
	"net/netip"
	"strconv"
)

const hexdig = "0123456789abcdef"

func appendUint(b []byte, v uint64) []byte { return strconv.AppendUint(b, v, 10) }

// appendHex prints "0x%x".
func appendHex(b []byte, v uint64) []byte { return strconv.AppendUint(append(b, "0x"...), v, 16) }

// appendAltHex prints C's "%#x": "0" for zero, "0x.." otherwise.
func appendAltHex(b []byte, v uint64) []byte {
	if v == 0 {
		return append(b, '0')
	}
	return appendHex(b, v)
}

func appendHexDots(b []byte, d []byte) []byte {
	for i, c := range d {
		if i > 0 {
			b = append(b, '.')
		}
		b = append(b, hexdig[c>>4], hexdig[c&0xf])
	}
	return b
}

var portNames = map[uint32]string{
	PortInPort: "IN_PORT", PortTable: "TABLE", PortNormal: "NORMAL", PortFlood: "FLOOD",
	PortAll: "ALL", PortController: "CONTROLLER", PortLocal: "LOCAL", PortAny: "ANY",
}

func appendPort(b []byte, p uint32) []byte {
	if n, ok := portNames[p]; ok {
		return append(b, n...)
	}
	return appendUint(b, uint64(p))
}

func appendMAC(b []byte, m []byte) []byte {
	for i := range 6 {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hexdig[m[i]>>4], hexdig[m[i]&0xf])
	}
	return b
}

// maskPrefixLen returns the CIDR length of mask, or -1 if not a prefix.
func maskPrefixLen(mask []byte) int {
	n := 0
	i := 0
	for ; i < len(mask) && mask[i] == 0xff; i++ {
		n += 8
	}
	if i < len(mask) {
		c := mask[i]
		for c&0x80 != 0 {
			n++
			c <<= 1
		}
		if c != 0 {
			return -1
		}
		for i++; i < len(mask); i++ {
			if mask[i] != 0 {
				return -1
			}
		}
	}
	return n
}

func appendIP(b []byte, v []byte) []byte {
	if len(v) == 4 {
		return netip.AddrFrom4([4]byte(v)).AppendTo(b)
	}
	return netip.AddrFrom16([16]byte(v)).AppendTo(b)
}

func appendIPMasked(b []byte, v, mask []byte, masked bool) []byte {
	b = appendIP(b, v)
	if !masked {
		return b
	}
	if n := maskPrefixLen(mask); n >= 0 {
		return appendUint(append(b, '/'), uint64(n))
	}
	return appendIP(append(b, '/'), mask)
}

// appendBigHex prints a byte string as one hex number without leading
// zeros ("0x0" when zero), as OVS does for 128-bit values.
func appendBigHex(b []byte, v []byte) []byte {
	b = append(b, "0x"...)
	started := false
	for _, c := range v {
		for _, d := range [2]byte{c >> 4, c & 0xf} {
			if d != 0 || started {
				b = append(b, hexdig[d])
				started = true
			}
		}
	}
	if !started {
		b = append(b, '0')
	}
	return b
}

var ctStateNames = [...]string{"new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"}

// appendFieldValue renders a field value (and mask) the way OVS's
// mf_format does for set_field and learn: decimal fields as %d, hex
// fields as %#x, addresses in their usual notation.
func appendFieldValue(b []byte, f *MatchField, altHex bool) []byte {
	fi := &fields[f.Field]
	n := int(fi.size)
	switch fi.kind {
	case kindMAC:
		b = appendMAC(b, f.Value[:6])
		if f.Masked {
			b = appendMAC(append(b, '/'), f.Mask[:6])
		}
		return b
	case kindIPv4, kindIPv6:
		return appendIPMasked(b, f.Value[:n], f.Mask[:n], f.Masked)
	case kindPort:
		return appendPort(b, uint32(f.Uint64()))
	case kindCTState:
		if !f.Masked {
			return appendCTFlags(b, uint32(f.Uint64()))
		}
	}
	if n > 8 {
		b = appendBigHex(b, f.Value[:n])
		if f.Masked {
			b = appendBigHex(append(b, '/'), f.Mask[:n])
		}
		return b
	}
	if fi.kind == kindDec {
		b = appendUint(b, f.Uint64())
	} else if altHex {
		b = appendAltHex(b, f.Uint64())
	} else {
		b = appendHex(b, f.Uint64())
	}
	if f.Masked {
		b = appendAltHex(append(b, '/'), f.MaskUint64())
	}
	return b
}

func appendCTFlags(b []byte, v uint32) []byte {
	if v == 0 {
		return append(b, '0')
	}
	first := true
	for i, n := range ctStateNames {
		if v&(1<<uint(i)) != 0 {
			if !first {
				b = append(b, '|')
			}
			b = append(b, n...)
			first = false
		}
	}
	if rest := v &^ 0xff; rest != 0 {
		if !first {
			b = append(b, '|')
		}
		b = appendHex(b, uint64(rest))
	}
	return b
}

// AppendText appends the match in the exact syntax OVS's match_format
// prints (the part of a dump-flows line between "priority=" and
// "actions="), including the leading "priority=N," when priority is not
// the default 32768.
func (m Match) AppendText(b []byte, priority uint16) []byte {
	start := len(b)
	var idx [numFields]*MatchField
	for i := range m {
		if m[i].Field.valid() {
			idx[m[i].Field] = &m[i]
		}
	}
	// xxreg fields are printed as the 32-bit registers they cover.
	var split Match
	for f := FieldXXReg0; f <= FieldXXReg3; f++ {
		if idx[f] != nil {
			split = append(split, *idx[f])
		}
	}
	if len(split) > 0 {
		split = split.Normalize()
		for i := range split {
			if idx[split[i].Field] == nil {
				idx[split[i].Field] = &split[i]
			}
		}
	}
	if priority != DefaultPriority {
		b = appendUint(append(b, "priority="...), uint64(priority))
		b = append(b, ',')
	}
	hexField := func(f Field, name string) {
		if mf := idx[f]; mf != nil {
			b = append(append(b, name...), '=')
			b = appendAltHex(b, mf.Uint64())
			if mf.Masked {
				b = appendAltHex(append(b, '/'), mf.MaskUint64())
			}
			b = append(b, ',')
		}
	}
	decField := func(f Field, name string) {
		if mf := idx[f]; mf != nil {
			b = append(append(b, name...), '=')
			b = appendUint(b, mf.Uint64())
			b = append(b, ',')
		}
	}
	// be16 fields: decimal when exact, hex/hex when masked.
	be16Field := func(f Field, name string) {
		if mf := idx[f]; mf != nil {
			b = append(append(b, name...), '=')
			if mf.Masked {
				b = appendHex(b, mf.Uint64())
				b = appendHex(append(b, '/'), mf.MaskUint64())
			} else {
				b = appendUint(b, mf.Uint64())
			}
			b = append(b, ',')
		}
	}
	ipField := func(f Field, name string) {
		if mf := idx[f]; mf != nil {
			b = append(append(b, name...), '=')
			n := f.Size()
			b = appendIPMasked(b, mf.Value[:n], mf.Mask[:n], mf.Masked)
			b = append(b, ',')
		}
	}
	macField := func(f Field, name string) {
		if mf := idx[f]; mf != nil {
			b = append(append(b, name...), '=')
			b = appendFieldValue(b, mf, false)
			b = append(b, ',')
		}
	}
	hexField(FieldPktMark, "pkt_mark")
	decField(FieldConjID, "conj_id")
	if mf := idx[FieldCTState]; mf != nil {
		b = append(b, "ct_state="...)
		if !mf.Masked {
			b = appendCTFlags(b, uint32(mf.Uint64()))
		} else {
			v, mk := uint32(mf.Uint64()), uint32(mf.MaskUint64())
			for i, n := range ctStateNames {
				bit := uint32(1) << uint(i)
				if mk&bit != 0 {
					if v&bit != 0 {
						b = append(b, '+')
					} else {
						b = append(b, '-')
					}
					b = append(b, n...)
				}
			}
		}
		b = append(b, ',')
	}
	if mf := idx[FieldCTZone]; mf != nil {
		b = appendUint(append(b, "ct_zone="...), mf.Uint64())
		b = append(b, ',')
	}
	hexField(FieldCTMark, "ct_mark")
	if mf := idx[FieldCTLabel]; mf != nil {
		b = appendBigHex(append(b, "ct_label="...), mf.Value[:16])
		if mf.Masked {
			b = appendBigHex(append(b, '/'), mf.Mask[:16])
		}
		b = append(b, ',')
	}
	ipField(FieldCTNwSrc, "ct_nw_src")
	ipField(FieldCTIPv6Src, "ct_ipv6_src")
	ipField(FieldCTNwDst, "ct_nw_dst")
	ipField(FieldCTIPv6Dst, "ct_ipv6_dst")
	if idx[FieldCTNwProto] != nil {
		decField(FieldCTNwProto, "ct_nw_proto")
		be16Field(FieldCTTpSrc, "ct_tp_src")
		be16Field(FieldCTTpDst, "ct_tp_dst")
	}
	var ethType uint16
	var proto uint8
	hasProto := idx[FieldIPProto] != nil
	if hasProto {
		proto = uint8(idx[FieldIPProto].Uint64())
	}
	skipType, skipProto := false, false
	if et := idx[FieldEthType]; et != nil {
		ethType = uint16(et.Uint64())
		skipType = true
		name := ""
		switch ethType {
		case ethIPv4:
			name = "ip"
			if hasProto {
				switch proto {
				case 1:
					name = "icmp"
				case 2:
					name = "igmp"
				case 6:
					name = "tcp"
				case 17:
					name = "udp"
				case 132:
					name = "sctp"
				}
				skipProto = name != "ip"
			}
		case ethIPv6:
			name = "ipv6"
			if hasProto {
				switch proto {
				case 58:
					name = "icmp6"
				case 6:
					name = "tcp6"
				case 17:
					name = "udp6"
				case 132:
					name = "sctp6"
				}
				skipProto = name != "ipv6"
			}
		case ethARP:
			name = "arp"
		case 0x8035:
			name = "rarp"
		case 0x8847:
			name = "mpls"
		case 0x8848:
			name = "mplsm"
		default:
			skipType = false
		}
		if skipType {
			b = append(append(b, name...), ',')
		}
	}
	for f := FieldReg0; f <= FieldReg15; f++ {
		hexField(f, fields[f].name)
	}
	hexField(FieldTunID, "tun_id")
	ipField(FieldTunIPv4Src, "tun_src")
	ipField(FieldTunIPv4Dst, "tun_dst")
	ipField(FieldTunIPv6Src, "tun_ipv6_src")
	ipField(FieldTunIPv6Dst, "tun_ipv6_dst")
	hexField(FieldMetadata, "metadata")
	if mf := idx[FieldInPort]; mf != nil {
		b = appendPort(append(b, "in_port="...), uint32(mf.Uint64()))
		b = append(b, ',')
	}
	b = appendVLAN(b, idx[FieldVLANVID], idx[FieldVLANPCP])
	macField(FieldEthSrc, "dl_src")
	macField(FieldEthDst, "dl_dst")
	if !skipType && idx[FieldEthType] != nil {
		b = append(b, "dl_type=0x"...)
		v := idx[FieldEthType].Uint64()
		b = append(b, hexdig[v>>12&0xf], hexdig[v>>8&0xf], hexdig[v>>4&0xf], hexdig[v&0xf], ',')
	}
	switch ethType {
	case ethIPv6:
		ipField(FieldIPv6Src, "ipv6_src")
		ipField(FieldIPv6Dst, "ipv6_dst")
	case ethARP, 0x8035:
		ipField(FieldARPSPA, "arp_spa")
		ipField(FieldARPTPA, "arp_tpa")
	default:
		ipField(FieldIPv4Src, "nw_src")
		ipField(FieldIPv4Dst, "nw_dst")
	}
	if !skipProto {
		if ethType == ethARP || ethType == 0x8035 {
			decField(FieldARPOp, "arp_op")
		} else {
			decField(FieldIPProto, "nw_proto")
		}
	}
	if ethType == ethARP || ethType == 0x8035 {
		macField(FieldARPSHA, "arp_sha")
		macField(FieldARPTHA, "arp_tha")
	}
	if mf := idx[FieldIPDSCP]; mf != nil {
		b = appendUint(append(b, "nw_tos="...), mf.Uint64()<<2)
		b = append(b, ',')
	}
	decField(FieldIPECN, "nw_ecn")
	decField(FieldIPTTL, "nw_ttl")
	switch {
	case ethType == ethIPv4 && hasProto && proto == 1:
		decField(FieldICMPv4Type, "icmp_type")
		decField(FieldICMPv4Code, "icmp_code")
	case ethType == ethIPv6 && hasProto && proto == 58:
		decField(FieldICMPv6Type, "icmp_type")
		decField(FieldICMPv6Code, "icmp_code")
		ipField(FieldNDTarget, "nd_target")
		macField(FieldNDSLL, "nd_sll")
		macField(FieldNDTLL, "nd_tll")
	default:
		be16Field(FieldTCPSrc, "tp_src")
		be16Field(FieldUDPSrc, "tp_src")
		be16Field(FieldSCTPSrc, "tp_src")
		be16Field(FieldTCPDst, "tp_dst")
		be16Field(FieldUDPDst, "tp_dst")
		be16Field(FieldSCTPDst, "tp_dst")
	}
	if mf := idx[FieldTCPFlags]; mf != nil {
		b = appendTCPFlags(append(b, "tcp_flags="...), uint16(mf.Uint64()), uint16(mf.MaskUint64())&0xfff)
		b = append(b, ',')
	}
	if len(b) > start && b[len(b)-1] == ',' {
		b = b[:len(b)-1]
	}
	return b
}

// appendVLAN renders vlan_vid/vlan_pcp the way OVS prints the 802.1Q TCI.
func appendVLAN(b []byte, vid, pcp *MatchField) []byte {
	if vid == nil && pcp == nil {
		return b
	}
	var tci, mask uint16
	if vid != nil {
		v, m := uint16(vid.Uint64()), uint16(vid.MaskUint64())
		tci |= v & 0x1fff
		mask |= m & 0x1fff
	}
	if pcp != nil {
		tci |= uint16(pcp.Uint64()&7)<<13 | 0x1000
		mask |= 0xe000 | 0x1000
	}
	vidMask := mask & 0x0fff
	pcpMask := mask & 0xe000
	cfi := mask & 0x1000
	if cfi != 0 && tci&0x1000 != 0 && (vidMask == 0 || vidMask == 0x0fff) && (pcpMask == 0 || pcpMask == 0xe000) && (vidMask != 0 || pcpMask != 0) {
		if vidMask != 0 {
			b = appendUint(append(b, "dl_vlan="...), uint64(tci&0xfff))
			b = append(b, ',')
		}
		if pcpMask != 0 {
			b = appendUint(append(b, "dl_vlan_pcp="...), uint64(tci>>13))
			b = append(b, ',')
		}
		return b
	}
	x := func(b []byte, v uint16) []byte {
		return append(b, '0', 'x', hexdig[v>>12&0xf], hexdig[v>>8&0xf], hexdig[v>>4&0xf], hexdig[v&0xf])
	}
	b = x(append(b, "vlan_tci="...), tci)
	if mask != 0xffff {
		b = x(append(b, '/'), mask)
	}
	return append(b, ',')
}

// String renders the match as OVS does, without a priority.
func (m Match) String() string { return string(m.AppendText(nil, DefaultPriority)) }

var tcpFlagNames = [...]string{"fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]"}

// appendTCPFlags prints as OVS's format_flags_masked: "syn|ack" when all
// 12 bits are matched, "+syn-ack" when some are.
func appendTCPFlags(b []byte, v, mask uint16) []byte {
	switch mask {
	case 0xfff:
		if v == 0 {
			return append(b, '0')
		}
		first := true
		for i, n := range tcpFlagNames {
			if v&(1<<i) != 0 {
				if !first {
					b = append(b, '|')
				}
				b = append(b, n...)
				first = false
			}
		}
		return b
	case 0:
		return append(b, "0/0"...)
	}
	for i, n := range tcpFlagNames {
		if mask&(1<<i) != 0 {
			if v&(1<<i) != 0 {
				b = append(b, '+')
			} else {
				b = append(b, '-')
			}
			b = append(b, n...)
		}
	}
	return b
}
