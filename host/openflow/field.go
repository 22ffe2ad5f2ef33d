package openflow

import "fmt"

// Field names one matchable/settable packet or metadata field. The
// numeric order of the constants is the order fields are encoded on the
// wire, which puts every prerequisite (eth_type, ip_proto) before the
// fields that depend on it, as OVS requires.
type Field uint8

// Fields. Names follow the OVS field names (ovs-fields(7)).
const (
	FieldNone Field = iota
	FieldInPort
	FieldMetadata
	FieldTunID
	FieldTunIPv4Src
	FieldTunIPv4Dst
	FieldReg0
	FieldReg1
	FieldReg2
	FieldReg3
	FieldReg4
	FieldReg5
	FieldReg6
	FieldReg7
	FieldReg8
	FieldReg9
	FieldReg10
	FieldReg11
	FieldReg12
	FieldReg13
	FieldReg14
	FieldReg15
	FieldXXReg0
	FieldXXReg1
	FieldXXReg2
	FieldXXReg3
	FieldPktMark
	FieldConjID
	FieldCTState
	FieldCTZone
	FieldCTMark
	FieldCTLabel
	FieldEthDst
	FieldEthSrc
	FieldEthType
	FieldVLANVID
	FieldVLANPCP
	FieldIPDSCP
	FieldIPECN
	FieldIPProto
	FieldIPTTL
	FieldIPv4Src
	FieldIPv4Dst
	FieldIPv6Src
	FieldIPv6Dst
	FieldTCPSrc
	FieldTCPDst
	FieldUDPSrc
	FieldUDPDst
	FieldSCTPSrc
	FieldSCTPDst
	FieldICMPv4Type
	FieldICMPv4Code
	FieldARPOp
	FieldARPSPA
	FieldARPTPA
	FieldARPSHA
	FieldARPTHA
	FieldICMPv6Type
	FieldICMPv6Code
	FieldNDTarget
	FieldNDSLL
	FieldNDTLL
	FieldCTNwProto
	FieldCTNwSrc
	FieldCTNwDst
	FieldCTIPv6Src
	FieldCTIPv6Dst
	FieldCTTpSrc
	FieldCTTpDst
	FieldTCPFlags
	FieldTunIPv6Src
	FieldTunIPv6Dst
	numFields
)

// valueKind selects how a field value is rendered as text.
type valueKind uint8

const (
	kindHex valueKind = iota
	kindDec
	kindMAC
	kindIPv4
	kindIPv6
	kindPort
	kindCTState
)

// OXM/NXM classes.
const (
	classNXM0     uint16 = 0x0000
	classNXM1     uint16 = 0x0001
	classOpenFlow uint16 = 0x8000
)

type fieldInfo struct {
	name     string // OVS field name as used by set_field and learn, e.g. "eth_src"
	nxm      string // name in subfield syntax, e.g. "NXM_OF_ETH_SRC"
	class    uint16
	code     uint8
	size     uint8 // value size in bytes
	maskable bool
	kind     valueKind
	// prereq is the eth_type (and ip_proto when proto != 0) the field needs.
	ethType uint16
	proto   uint8
	// ethType2 is an alternative eth_type (ip fields accept IPv4 and IPv6).
	ethType2 uint16
}

const (
	ethIPv4 = 0x0800
	ethIPv6 = 0x86dd
	ethARP  = 0x0806
)

// fields is the field table. To add a field: see doc.go.
var fields = [numFields]fieldInfo{
	FieldInPort:     {name: "in_port", nxm: "OXM_OF_IN_PORT", class: classOpenFlow, code: 0, size: 4, kind: kindPort},
	FieldMetadata:   {name: "metadata", nxm: "OXM_OF_METADATA", class: classOpenFlow, code: 2, size: 8, maskable: true},
	FieldTunID:      {name: "tun_id", nxm: "NXM_NX_TUN_ID", class: classOpenFlow, code: 38, size: 8, maskable: true},
	FieldTunIPv4Src: {name: "tun_src", nxm: "NXM_NX_TUN_IPV4_SRC", class: classNXM1, code: 31, size: 4, maskable: true, kind: kindIPv4},
	FieldTunIPv4Dst: {name: "tun_dst", nxm: "NXM_NX_TUN_IPV4_DST", class: classNXM1, code: 32, size: 4, maskable: true, kind: kindIPv4},
	FieldReg0:       {name: "reg0", nxm: "NXM_NX_REG0", class: classNXM1, code: 0, size: 4, maskable: true},
	FieldReg1:       {name: "reg1", nxm: "NXM_NX_REG1", class: classNXM1, code: 1, size: 4, maskable: true},
	FieldReg2:       {name: "reg2", nxm: "NXM_NX_REG2", class: classNXM1, code: 2, size: 4, maskable: true},
	FieldReg3:       {name: "reg3", nxm: "NXM_NX_REG3", class: classNXM1, code: 3, size: 4, maskable: true},
	FieldReg4:       {name: "reg4", nxm: "NXM_NX_REG4", class: classNXM1, code: 4, size: 4, maskable: true},
	FieldReg5:       {name: "reg5", nxm: "NXM_NX_REG5", class: classNXM1, code: 5, size: 4, maskable: true},
	FieldReg6:       {name: "reg6", nxm: "NXM_NX_REG6", class: classNXM1, code: 6, size: 4, maskable: true},
	FieldReg7:       {name: "reg7", nxm: "NXM_NX_REG7", class: classNXM1, code: 7, size: 4, maskable: true},
	FieldReg8:       {name: "reg8", nxm: "NXM_NX_REG8", class: classNXM1, code: 8, size: 4, maskable: true},
	FieldReg9:       {name: "reg9", nxm: "NXM_NX_REG9", class: classNXM1, code: 9, size: 4, maskable: true},
	FieldReg10:      {name: "reg10", nxm: "NXM_NX_REG10", class: classNXM1, code: 10, size: 4, maskable: true},
	FieldReg11:      {name: "reg11", nxm: "NXM_NX_REG11", class: classNXM1, code: 11, size: 4, maskable: true},
	FieldReg12:      {name: "reg12", nxm: "NXM_NX_REG12", class: classNXM1, code: 12, size: 4, maskable: true},
	FieldReg13:      {name: "reg13", nxm: "NXM_NX_REG13", class: classNXM1, code: 13, size: 4, maskable: true},
	FieldReg14:      {name: "reg14", nxm: "NXM_NX_REG14", class: classNXM1, code: 14, size: 4, maskable: true},
	FieldReg15:      {name: "reg15", nxm: "NXM_NX_REG15", class: classNXM1, code: 15, size: 4, maskable: true},
	FieldXXReg0:     {name: "xxreg0", nxm: "NXM_NX_XXREG0", class: classNXM1, code: 111, size: 16, maskable: true},
	FieldXXReg1:     {name: "xxreg1", nxm: "NXM_NX_XXREG1", class: classNXM1, code: 112, size: 16, maskable: true},
	FieldXXReg2:     {name: "xxreg2", nxm: "NXM_NX_XXREG2", class: classNXM1, code: 113, size: 16, maskable: true},
	FieldXXReg3:     {name: "xxreg3", nxm: "NXM_NX_XXREG3", class: classNXM1, code: 114, size: 16, maskable: true},
	FieldPktMark:    {name: "pkt_mark", nxm: "NXM_NX_PKT_MARK", class: classNXM1, code: 33, size: 4, maskable: true},
	FieldConjID:     {name: "conj_id", nxm: "NXM_NX_CONJ_ID", class: classNXM1, code: 37, size: 4, kind: kindDec},
	FieldCTState:    {name: "ct_state", nxm: "NXM_NX_CT_STATE", class: classNXM1, code: 105, size: 4, maskable: true, kind: kindCTState},
	FieldCTZone:     {name: "ct_zone", nxm: "NXM_NX_CT_ZONE", class: classNXM1, code: 106, size: 2},
	FieldCTMark:     {name: "ct_mark", nxm: "NXM_NX_CT_MARK", class: classNXM1, code: 107, size: 4, maskable: true},
	FieldCTLabel:    {name: "ct_label", nxm: "NXM_NX_CT_LABEL", class: classNXM1, code: 108, size: 16, maskable: true},
	FieldEthDst:     {name: "eth_dst", nxm: "NXM_OF_ETH_DST", class: classOpenFlow, code: 3, size: 6, maskable: true, kind: kindMAC},
	FieldEthSrc:     {name: "eth_src", nxm: "NXM_OF_ETH_SRC", class: classOpenFlow, code: 4, size: 6, maskable: true, kind: kindMAC},
	FieldEthType:    {name: "eth_type", nxm: "NXM_OF_ETH_TYPE", class: classOpenFlow, code: 5, size: 2},
	FieldVLANVID:    {name: "vlan_vid", nxm: "OXM_OF_VLAN_VID", class: classOpenFlow, code: 6, size: 2, maskable: true, kind: kindDec},
	FieldVLANPCP:    {name: "vlan_pcp", nxm: "OXM_OF_VLAN_PCP", class: classOpenFlow, code: 7, size: 1, kind: kindDec},
	FieldIPDSCP:     {name: "ip_dscp", nxm: "OXM_OF_IP_DSCP", class: classOpenFlow, code: 8, size: 1, kind: kindDec, ethType: ethIPv4, ethType2: ethIPv6},
	FieldIPECN:      {name: "nw_ecn", nxm: "NXM_NX_IP_ECN", class: classOpenFlow, code: 9, size: 1, kind: kindDec, ethType: ethIPv4, ethType2: ethIPv6},
	FieldIPProto:    {name: "nw_proto", nxm: "NXM_OF_IP_PROTO", class: classOpenFlow, code: 10, size: 1, kind: kindDec, ethType: ethIPv4, ethType2: ethIPv6},
	FieldIPTTL:      {name: "nw_ttl", nxm: "NXM_NX_IP_TTL", class: classNXM1, code: 29, size: 1, kind: kindDec, ethType: ethIPv4, ethType2: ethIPv6},
	FieldIPv4Src:    {name: "ip_src", nxm: "NXM_OF_IP_SRC", class: classOpenFlow, code: 11, size: 4, maskable: true, kind: kindIPv4, ethType: ethIPv4},
	FieldIPv4Dst:    {name: "ip_dst", nxm: "NXM_OF_IP_DST", class: classOpenFlow, code: 12, size: 4, maskable: true, kind: kindIPv4, ethType: ethIPv4},
	FieldIPv6Src:    {name: "ipv6_src", nxm: "NXM_NX_IPV6_SRC", class: classOpenFlow, code: 26, size: 16, maskable: true, kind: kindIPv6, ethType: ethIPv6},
	FieldIPv6Dst:    {name: "ipv6_dst", nxm: "NXM_NX_IPV6_DST", class: classOpenFlow, code: 27, size: 16, maskable: true, kind: kindIPv6, ethType: ethIPv6},
	FieldTCPSrc:     {name: "tcp_src", nxm: "NXM_OF_TCP_SRC", class: classOpenFlow, code: 13, size: 2, maskable: true, kind: kindDec, ethType: ethIPv4, ethType2: ethIPv6, proto: 6},
	FieldTCPDst:     {name: "tcp_dst", nxm: "NXM_OF_TCP_DST", class: classOpenFlow, code: 14, size: 2, maskable: true, kind: kindDec, ethType: ethIPv4, ethType2: ethIPv6, proto: 6},
	FieldUDPSrc:     {name: "udp_src", nxm: "NXM_OF_UDP_SRC", class: classOpenFlow, code: 15, size: 2, maskable: true, kind: kindDec, ethType: ethIPv4, ethType2: ethIPv6, proto: 17},
	FieldUDPDst:     {name: "udp_dst", nxm: "NXM_OF_UDP_DST", class: classOpenFlow, code: 16, size: 2, maskable: true, kind: kindDec, ethType: ethIPv4, ethType2: ethIPv6, proto: 17},
	FieldSCTPSrc:    {name: "sctp_src", nxm: "OXM_OF_SCTP_SRC", class: classOpenFlow, code: 17, size: 2, maskable: true, kind: kindDec, ethType: ethIPv4, ethType2: ethIPv6, proto: 132},
	FieldSCTPDst:    {name: "sctp_dst", nxm: "OXM_OF_SCTP_DST", class: classOpenFlow, code: 18, size: 2, maskable: true, kind: kindDec, ethType: ethIPv4, ethType2: ethIPv6, proto: 132},
	FieldICMPv4Type: {name: "icmp_type", nxm: "NXM_OF_ICMP_TYPE", class: classOpenFlow, code: 19, size: 1, kind: kindDec, ethType: ethIPv4, proto: 1},
	FieldICMPv4Code: {name: "icmp_code", nxm: "NXM_OF_ICMP_CODE", class: classOpenFlow, code: 20, size: 1, kind: kindDec, ethType: ethIPv4, proto: 1},
	FieldARPOp:      {name: "arp_op", nxm: "NXM_OF_ARP_OP", class: classOpenFlow, code: 21, size: 2, kind: kindDec, ethType: ethARP},
	FieldARPSPA:     {name: "arp_spa", nxm: "NXM_OF_ARP_SPA", class: classOpenFlow, code: 22, size: 4, maskable: true, kind: kindIPv4, ethType: ethARP},
	FieldARPTPA:     {name: "arp_tpa", nxm: "NXM_OF_ARP_TPA", class: classOpenFlow, code: 23, size: 4, maskable: true, kind: kindIPv4, ethType: ethARP},
	FieldARPSHA:     {name: "arp_sha", nxm: "NXM_NX_ARP_SHA", class: classOpenFlow, code: 24, size: 6, maskable: true, kind: kindMAC, ethType: ethARP},
	FieldARPTHA:     {name: "arp_tha", nxm: "NXM_NX_ARP_THA", class: classOpenFlow, code: 25, size: 6, maskable: true, kind: kindMAC, ethType: ethARP},
	FieldICMPv6Type: {name: "icmpv6_type", nxm: "NXM_NX_ICMPV6_TYPE", class: classOpenFlow, code: 29, size: 1, kind: kindDec, ethType: ethIPv6, proto: 58},
	FieldICMPv6Code: {name: "icmpv6_code", nxm: "NXM_NX_ICMPV6_CODE", class: classOpenFlow, code: 30, size: 1, kind: kindDec, ethType: ethIPv6, proto: 58},
	FieldNDTarget:   {name: "nd_target", nxm: "NXM_NX_ND_TARGET", class: classOpenFlow, code: 31, size: 16, maskable: true, kind: kindIPv6, ethType: ethIPv6, proto: 58},
	FieldNDSLL:      {name: "nd_sll", nxm: "NXM_NX_ND_SLL", class: classOpenFlow, code: 32, size: 6, maskable: true, kind: kindMAC, ethType: ethIPv6, proto: 58},
	FieldNDTLL:      {name: "nd_tll", nxm: "NXM_NX_ND_TLL", class: classOpenFlow, code: 33, size: 6, maskable: true, kind: kindMAC, ethType: ethIPv6, proto: 58},
	FieldCTNwProto:  {name: "ct_nw_proto", nxm: "NXM_NX_CT_NW_PROTO", class: classNXM1, code: 119, size: 1, kind: kindDec},
	FieldCTNwSrc:    {name: "ct_nw_src", nxm: "NXM_NX_CT_NW_SRC", class: classNXM1, code: 120, size: 4, maskable: true, kind: kindIPv4},
	FieldCTNwDst:    {name: "ct_nw_dst", nxm: "NXM_NX_CT_NW_DST", class: classNXM1, code: 121, size: 4, maskable: true, kind: kindIPv4},
	FieldCTIPv6Src:  {name: "ct_ipv6_src", nxm: "NXM_NX_CT_IPV6_SRC", class: classNXM1, code: 122, size: 16, maskable: true, kind: kindIPv6},
	FieldCTIPv6Dst:  {name: "ct_ipv6_dst", nxm: "NXM_NX_CT_IPV6_DST", class: classNXM1, code: 123, size: 16, maskable: true, kind: kindIPv6},
	FieldCTTpSrc:    {name: "ct_tp_src", nxm: "NXM_NX_CT_TP_SRC", class: classNXM1, code: 124, size: 2, maskable: true, kind: kindDec},
	FieldCTTpDst:    {name: "ct_tp_dst", nxm: "NXM_NX_CT_TP_DST", class: classNXM1, code: 125, size: 2, maskable: true, kind: kindDec},
	FieldTCPFlags:   {name: "tcp_flags", nxm: "NXM_NX_TCP_FLAGS", class: classOpenFlow, code: 42, size: 2, maskable: true, ethType: ethIPv4, ethType2: ethIPv6, proto: 6},
	FieldTunIPv6Src: {name: "tun_ipv6_src", nxm: "NXM_NX_TUN_IPV6_SRC", class: classNXM1, code: 109, size: 16, maskable: true, kind: kindIPv6},
	FieldTunIPv6Dst: {name: "tun_ipv6_dst", nxm: "NXM_NX_TUN_IPV6_DST", class: classNXM1, code: 110, size: 16, maskable: true, kind: kindIPv6},
}

// headerIndex maps a wire (class, code) pair to a Field. It also holds
// the NXM aliases OVS may use for the same field.
var headerIndex = map[uint32]Field{}

func init() {
	for f := FieldInPort; f < numFields; f++ {
		fi := &fields[f]
		headerIndex[uint32(fi.class)<<16|uint32(fi.code)] = f
	}
	aliases := []struct {
		class uint16
		code  uint8
		f     Field
	}{
		{classNXM0, 1, FieldEthDst}, {classNXM0, 2, FieldEthSrc}, {classNXM0, 3, FieldEthType},
		{classNXM0, 6, FieldIPProto}, {classNXM0, 7, FieldIPv4Src}, {classNXM0, 8, FieldIPv4Dst},
		{classNXM0, 9, FieldTCPSrc}, {classNXM0, 10, FieldTCPDst}, {classNXM0, 11, FieldUDPSrc},
		{classNXM0, 12, FieldUDPDst}, {classNXM0, 13, FieldICMPv4Type}, {classNXM0, 14, FieldICMPv4Code},
		{classNXM0, 15, FieldARPOp}, {classNXM0, 16, FieldARPSPA}, {classNXM0, 17, FieldARPTPA},
		{classNXM1, 16, FieldTunID}, {classNXM1, 17, FieldARPSHA}, {classNXM1, 18, FieldARPTHA},
		{classNXM1, 19, FieldIPv6Src}, {classNXM1, 20, FieldIPv6Dst}, {classNXM1, 21, FieldICMPv6Type},
		{classNXM1, 22, FieldICMPv6Code}, {classNXM1, 23, FieldNDTarget}, {classNXM1, 24, FieldNDSLL},
		{classNXM1, 25, FieldNDTLL}, {classNXM1, 28, FieldIPECN}, {classNXM1, 34, FieldTCPFlags},
	}
	for _, a := range aliases {
		headerIndex[uint32(a.class)<<16|uint32(a.code)] = a.f
	}
}

// String returns the OVS field name, e.g. "eth_src" or "reg3".
func (f Field) String() string {
	if f > FieldNone && f < numFields {
		return fields[f].name
	}
	return fmt.Sprintf("field(%d)", uint8(f))
}

// Size is the field's value size in bytes.
func (f Field) Size() int {
	if f > FieldNone && f < numFields {
		return int(fields[f].size)
	}
	return 0
}

// Bits is the field's width in bits.
func (f Field) Bits() int { return f.Size() * 8 }

// Maskable reports whether OVS accepts a mask for the field.
func (f Field) Maskable() bool { return f > FieldNone && f < numFields && fields[f].maskable }

func (f Field) valid() bool { return f > FieldNone && f < numFields }

// oxmHeader returns the 32-bit OXM/NXM header for the field.
func (f Field) oxmHeader(masked bool) uint32 {
	fi := &fields[f]
	n := uint32(fi.size)
	h := uint32(fi.class)<<16 | uint32(fi.code)<<9 | n
	if masked {
		h = h&^0xff | 1<<8 | 2*n // hasmask doubles the payload length
	}
	return h
}

// fieldFromHeader decodes a 32-bit OXM header. It returns the field,
// whether it is masked, and the payload length.
func fieldFromHeader(h uint32) (Field, bool, int) {
	class := uint16(h >> 16)
	code := uint8(h>>9) & 0x7f
	return headerIndex[uint32(class)<<16|uint32(code)], h&(1<<8) != 0, int(h & 0xff)
}
