package openflow

import (
	"net/netip"
)

// Action is one OpenFlow or Nicira action. The concrete types below are
// the whole set; each encodes, decodes and renders itself as the text
// ovs-ofctl prints.
type Action interface {
	appendAction(b []byte) ([]byte, error)
	appendText(b []byte) []byte
	String() string
}

// Reserved OpenFlow port numbers (OpenFlow 1.1+ 32-bit form).
const (
	PortMax        uint32 = 0xffffff00
	PortInPort     uint32 = 0xfffffff8
	PortTable      uint32 = 0xfffffff9
	PortNormal     uint32 = 0xfffffffa
	PortFlood      uint32 = 0xfffffffb
	PortAll        uint32 = 0xfffffffc
	PortController uint32 = 0xfffffffd
	PortLocal      uint32 = 0xfffffffe
	PortAny        uint32 = 0xffffffff
)

// OpenFlow action type codes.
const (
	atOutput    uint16 = 0
	atPushVLAN  uint16 = 17
	atPopVLAN   uint16 = 18
	atGroup     uint16 = 22
	atDecNwTTL  uint16 = 24
	atSetField  uint16 = 25
	atCopyField uint16 = 28
	atMeter     uint16 = 29
	atVendor    uint16 = 0xffff
	nxResubmit  uint16 = 1
	nxRegMove   uint16 = 6
	nxNote      uint16 = 8
	nxResubmitT uint16 = 14
	nxOutputReg uint16 = 15
	nxLearn     uint16 = 16
	nxConj      uint16 = 34
	nxCT        uint16 = 35
	nxNAT       uint16 = 36
	nxCtrl2     uint16 = 37
	nxTrunc     uint16 = 39
	nxCTClear   uint16 = 43
)

// beginAction appends the type/len header and returns the start offset
// so endAction can patch the length and pad to 8 bytes.
func beginAction(b []byte, typ uint16) ([]byte, int) {
	start := len(b)
	b = put16(b, typ)
	b = put16(b, 0)
	return b, start
}

func beginNX(b []byte, subtype uint16) ([]byte, int) {
	b, start := beginAction(b, atVendor)
	b = put32(b, nxVendor)
	b = put16(b, subtype)
	return b, start
}

func endAction(b []byte, start int) []byte {
	b = pad8(b, start)
	setLen16(b, start+2, len(b)-start)
	return b
}

// Output sends the packet to Port. For PortController, MaxLen bytes are
// sent (0 means the whole packet). For other ports a non-zero MaxLen
// truncates the packet (OVS output(port=..,max_len=..)).
type Output struct {
	Port   uint32
	MaxLen uint16
}

func (a Output) appendAction(b []byte) ([]byte, error) {
	if a.MaxLen != 0 && a.Port != PortController {
		if a.Port > 0xfeff && a.Port < PortMax {
			return b, encodeError("output", "port %d does not fit the 16-bit truncating output port", a.Port)
		}
		b, s := beginNX(b, nxTrunc)
		b = put16(b, port16(a.Port))
		b = put32(b, uint32(a.MaxLen))
		return endAction(b, s), nil
	}
	b, s := beginAction(b, atOutput)
	b = put32(b, a.Port)
	ml := a.MaxLen
	if ml == 0 {
		ml = 0xffff
	}
	b = put16(b, ml)
	b = zeros(b, 6)
	return endAction(b, s), nil
}

func (a Output) appendText(b []byte) []byte {
	switch {
	case a.Port == PortController:
		b = append(b, "CONTROLLER:"...)
		ml := a.MaxLen
		if ml == 0 {
			ml = 0xffff
		}
		return appendUint(b, uint64(ml))
	case a.MaxLen != 0:
		b = append(b, "output(port="...)
		b = appendPort(b, a.Port)
		b = append(b, ",max_len="...)
		b = appendUint(b, uint64(a.MaxLen))
		return append(b, ')')
	case a.Port >= PortMax:
		return appendPort(b, a.Port)
	}
	b = append(b, "output:"...)
	return appendUint(b, uint64(a.Port))
}

func (a Output) String() string { return string(a.appendText(nil)) }

// Group sends the packet to a group.
type Group struct{ ID uint32 }

func (a Group) appendAction(b []byte) ([]byte, error) {
	b, s := beginAction(b, atGroup)
	b = put32(b, a.ID)
	return endAction(b, s), nil
}
func (a Group) appendText(b []byte) []byte { return appendUint(append(b, "group:"...), uint64(a.ID)) }
func (a Group) String() string             { return string(a.appendText(nil)) }

// SetField writes a field; a masked MatchField writes only the masked
// bits (this is also how register loads are expressed).
type SetField struct{ MatchField }

// Set returns a SetField action writing f.
func Set(f MatchField) SetField { return SetField{f} }

// Load writes v into bits [ofs, ofs+nbits) of a field up to 64 bits wide,
// leaving the other bits alone (ovs-ofctl prints set_field:v/mask->f).
func Load(f Field, ofs, nbits int, v uint64) SetField {
	mask := (^uint64(0) >> (64 - uint(nbits))) << uint(ofs)
	return SetField{Masked(f, v<<uint(ofs), mask)}
}

func (a SetField) appendAction(b []byte) ([]byte, error) {
	if !a.Field.valid() {
		return b, encodeError("set_field", "unknown field %d", a.Field)
	}
	if a.Masked && !a.Field.Maskable() {
		return b, encodeError("set_field", "field %s cannot be set under a mask", a.Field)
	}
	b, s := beginAction(b, atSetField)
	b = appendOXM(b, &a.MatchField)
	return endAction(b, s), nil
}

func (a SetField) appendText(b []byte) []byte {
	b = append(b, "set_field:"...)
	b = appendFieldValue(b, &a.MatchField, true)
	b = append(b, "->"...)
	return append(b, fields[a.Field].name...)
}
func (a SetField) String() string { return string(a.appendText(nil)) }

// PushVLAN pushes a VLAN header (EtherType 0x8100 or 0x88a8).
type PushVLAN struct{ EtherType uint16 }

func (a PushVLAN) appendAction(b []byte) ([]byte, error) {
	b, s := beginAction(b, atPushVLAN)
	b = put16(b, a.EtherType)
	return endAction(b, s), nil
}
func (a PushVLAN) appendText(b []byte) []byte {
	return appendHex(append(b, "push_vlan:"...), uint64(a.EtherType))
}
func (a PushVLAN) String() string { return string(a.appendText(nil)) }

// PopVLAN removes the outer VLAN header.
type PopVLAN struct{}

func (PopVLAN) appendAction(b []byte) ([]byte, error) {
	b, s := beginAction(b, atPopVLAN)
	return endAction(b, s), nil
}
func (PopVLAN) appendText(b []byte) []byte { return append(b, "pop_vlan"...) }
func (a PopVLAN) String() string           { return "pop_vlan" }

// DecTTL decrements the IP TTL / hop limit.
type DecTTL struct{}

func (DecTTL) appendAction(b []byte) ([]byte, error) {
	b, s := beginAction(b, atDecNwTTL)
	return endAction(b, s), nil
}
func (DecTTL) appendText(b []byte) []byte { return append(b, "dec_ttl"...) }
func (a DecTTL) String() string           { return "dec_ttl" }

// Meter passes the packet through a meter (an action in OpenFlow 1.5).
type Meter struct{ ID uint32 }

func (a Meter) appendAction(b []byte) ([]byte, error) {
	b, s := beginAction(b, atMeter)
	b = put32(b, a.ID)
	return endAction(b, s), nil
}
func (a Meter) appendText(b []byte) []byte { return appendUint(append(b, "meter:"...), uint64(a.ID)) }
func (a Meter) String() string             { return string(a.appendText(nil)) }

// TableNone in Resubmit means "same table" (resubmit by port only).
const TableNone uint8 = 0xff

// Resubmit re-runs the pipeline on Table (TableNone: current table) as
// if the packet came in on Port (0 or PortInPort: its real in_port).
type Resubmit struct {
	Port  uint32
	Table uint8
}

// ResubmitTable is resubmit(,table).
func ResubmitTable(t uint8) Resubmit { return Resubmit{Port: PortInPort, Table: t} }

func (a Resubmit) port16() uint16 {
	if a.Port == 0 {
		return port16(PortInPort)
	}
	return port16(a.Port)
}

// port16 maps a 32-bit port number to the 16-bit form of older Nicira
// actions (reserved ports 0xffffff00+ become 0xff00+).
func port16(p uint32) uint16 {
	if p >= PortMax {
		return uint16(p - PortMax + 0xff00)
	}
	return uint16(p)
}

func (a Resubmit) appendAction(b []byte) ([]byte, error) {
	if a.Port > 0xfeff && a.Port < PortMax {
		return b, encodeError("resubmit", "port %d does not fit the 16-bit resubmit port", a.Port)
	}
	if a.Table == TableNone {
		b, s := beginNX(b, nxResubmit)
		b = put16(b, a.port16())
		return endAction(b, s), nil
	}
	b, s := beginNX(b, nxResubmitT)
	b = put16(b, a.port16())
	b = put8(b, a.Table)
	return endAction(b, s), nil
}

func (a Resubmit) appendText(b []byte) []byte {
	p := a.Port
	if p == 0 {
		p = PortInPort
	}
	if p != PortInPort && a.Table == TableNone {
		return appendPort(append(b, "resubmit:"...), p)
	}
	b = append(b, "resubmit("...)
	if p != PortInPort {
		b = appendPort(b, p)
	}
	b = append(b, ',')
	if a.Table != TableNone {
		b = appendUint(b, uint64(a.Table))
	}
	return append(b, ')')
}
func (a Resubmit) String() string { return string(a.appendText(nil)) }

// Subfield is a bit range of a field: bits [Ofs, Ofs+Bits) counted from
// the least significant bit. Bits 0 means the whole field.
type Subfield struct {
	Field Field
	Ofs   uint16
	Bits  uint16
}

// Whole returns the subfield covering all of f.
func Whole(f Field) Subfield { return Subfield{Field: f, Bits: uint16(f.Bits())} }

// Bits returns the subfield f[ofs..ofs+n-1].
func Bits(f Field, ofs, n int) Subfield { return Subfield{Field: f, Ofs: uint16(ofs), Bits: uint16(n)} }

func (s Subfield) nbits() uint16 {
	if s.Bits == 0 {
		return uint16(s.Field.Bits())
	}
	return s.Bits
}

func (s Subfield) check(what string) error {
	if !s.Field.valid() {
		return encodeError(what, "unknown field %d", s.Field)
	}
	if int(s.Ofs)+int(s.nbits()) > s.Field.Bits() {
		return encodeError(what, "bits %d..%d are outside %s (%d bits)", s.Ofs, int(s.Ofs)+int(s.nbits())-1, s.Field, s.Field.Bits())
	}
	return nil
}

func (s Subfield) ofsNbits() uint16 { return s.Ofs<<6 | (s.nbits() - 1) }

func (s Subfield) appendText(b []byte) []byte {
	b = append(b, fields[s.Field].nxm...)
	n := s.nbits()
	switch {
	case s.Ofs == 0 && int(n) == s.Field.Bits():
		return append(b, "[]"...)
	case n == 1:
		b = append(b, '[')
		b = appendUint(b, uint64(s.Ofs))
		return append(b, ']')
	}
	b = append(b, '[')
	b = appendUint(b, uint64(s.Ofs))
	b = append(b, ".."...)
	b = appendUint(b, uint64(s.Ofs+n-1))
	return append(b, ']')
}

func (s Subfield) String() string { return string(s.appendText(nil)) }

// Move copies Src to Dst (same width).
type Move struct{ Src, Dst Subfield }

func (a Move) appendAction(b []byte) ([]byte, error) {
	if err := a.Src.check("move"); err != nil {
		return b, err
	}
	if err := a.Dst.check("move"); err != nil {
		return b, err
	}
	if a.Src.nbits() != a.Dst.nbits() {
		return b, encodeError("move", "source is %d bits but destination is %d bits", a.Src.nbits(), a.Dst.nbits())
	}
	// OpenFlow 1.5 has move as a standard action, OFPAT_COPY_FIELD; OVS
	// refuses NXAST_REG_MOVE in 1.5.
	b, s := beginAction(b, atCopyField)
	b = put16(b, a.Src.nbits())
	b = put16(b, a.Src.Ofs)
	b = put16(b, a.Dst.Ofs)
	b = zeros(b, 2)
	b = put32(b, a.Src.Field.oxmHeader(false))
	b = put32(b, a.Dst.Field.oxmHeader(false))
	return endAction(b, s), nil
}

func (a Move) appendText(b []byte) []byte {
	b = a.Src.appendText(append(b, "move:"...))
	return a.Dst.appendText(append(b, "->"...))
}
func (a Move) String() string { return string(a.appendText(nil)) }

// OutputReg outputs to the port number held in Src.
type OutputReg struct{ Src Subfield }

func (a OutputReg) appendAction(b []byte) ([]byte, error) {
	if err := a.Src.check("output_reg"); err != nil {
		return b, err
	}
	b, s := beginNX(b, nxOutputReg)
	b = put16(b, a.Src.ofsNbits())
	b = put32(b, a.Src.Field.oxmHeader(false))
	b = put16(b, 0xffff)
	return endAction(b, s), nil
}
func (a OutputReg) appendText(b []byte) []byte { return a.Src.appendText(append(b, "output:"...)) }
func (a OutputReg) String() string             { return string(a.appendText(nil)) }

// Conjunction marks the flow as clause Clause (1-based) of NClauses of
// conjunctive match ID.
type Conjunction struct {
	ID       uint32
	Clause   uint8
	NClauses uint8
}

func (a Conjunction) appendAction(b []byte) ([]byte, error) {
	if a.Clause < 1 || a.Clause > a.NClauses || a.NClauses < 2 || a.NClauses > 64 {
		return b, encodeError("conjunction", "clause %d/%d: need 1 <= clause <= n and 2 <= n <= 64", a.Clause, a.NClauses)
	}
	b, s := beginNX(b, nxConj)
	b = put8(b, a.Clause-1)
	b = put8(b, a.NClauses)
	b = put32(b, a.ID)
	return endAction(b, s), nil
}
func (a Conjunction) appendText(b []byte) []byte {
	b = appendUint(append(b, "conjunction("...), uint64(a.ID))
	b = appendUint(append(b, ','), uint64(a.Clause))
	b = appendUint(append(b, '/'), uint64(a.NClauses))
	return append(b, ')')
}
func (a Conjunction) String() string { return string(a.appendText(nil)) }

// Note carries opaque bytes, visible in dumps; the switch ignores it.
// OVS pads the note so the action is a multiple of 8 bytes and shows the
// padding, so decoded notes include trailing zeros.
type Note struct{ Data []byte }

func (a Note) appendAction(b []byte) ([]byte, error) {
	b, s := beginNX(b, nxNote)
	b = append(b, a.Data...)
	if len(a.Data) < 6 {
		b = zeros(b, 6-len(a.Data))
	}
	return endAction(b, s), nil
}

func (a Note) appendText(b []byte) []byte {
	n := len(a.Data)
	if n < 6 {
		n = 6
	}
	n += (8 - (n+10)%8) % 8
	b = append(b, "note:"...)
	for i := range n {
		if i > 0 {
			b = append(b, '.')
		}
		var c byte
		if i < len(a.Data) {
			c = a.Data[i]
		}
		b = append(b, hexdig[c>>4], hexdig[c&0xf])
	}
	return b
}
func (a Note) String() string { return string(a.appendText(nil)) }

// CTClear clears the conntrack state of the packet.
type CTClear struct{}

func (CTClear) appendAction(b []byte) ([]byte, error) {
	b, s := beginNX(b, nxCTClear)
	return endAction(b, s), nil
}
func (CTClear) appendText(b []byte) []byte { return append(b, "ct_clear"...) }
func (CTClear) String() string             { return "ct_clear" }

// CT sends the packet through the connection tracker.
type CT struct {
	Commit bool
	Force  bool
	// Zone is the immediate zone; ZoneSrc, when its Field is set, takes the
	// zone from a field instead.
	Zone    uint16
	ZoneSrc Subfield
	// Recirc resubmits the packet to Table after tracking (ct(table=N)).
	Recirc bool
	Table  uint8
	Alg    uint16
	// NAT, when non-nil, applies NAT (it is the first nested action).
	NAT *NAT
	// Exec actions run on commit; OVS allows only set_field of ct_mark and
	// ct_label here.
	Exec []Action
}

func (a CT) appendAction(b []byte) ([]byte, error) {
	b, s := beginNX(b, nxCT)
	var flags uint16
	if a.Commit {
		flags |= 1
	}
	if a.Force {
		flags |= 2
	}
	b = put16(b, flags)
	if a.ZoneSrc.Field != FieldNone {
		if err := a.ZoneSrc.check("ct zone"); err != nil {
			return b, err
		}
		b = put32(b, a.ZoneSrc.Field.oxmHeader(false))
		b = put16(b, a.ZoneSrc.ofsNbits())
	} else {
		b = put32(b, 0)
		b = put16(b, a.Zone)
	}
	t := TableNone
	if a.Recirc {
		t = a.Table
	}
	b = put8(b, t)
	b = zeros(b, 3)
	b = put16(b, a.Alg)
	var err error
	if a.NAT != nil {
		if b, err = a.NAT.appendAction(b); err != nil {
			return b, err
		}
	}
	for _, x := range a.Exec {
		if b, err = x.appendAction(b); err != nil {
			return b, err
		}
	}
	return endAction(b, s), nil
}

func (a CT) appendText(b []byte) []byte {
	start := len(b)
	b = append(b, "ct("...)
	if a.Commit {
		b = append(b, "commit,"...)
	}
	if a.Force {
		b = append(b, "force,"...)
	}
	if a.Recirc {
		b = appendUint(append(b, "table="...), uint64(a.Table))
		b = append(b, ',')
	}
	if a.ZoneSrc.Field != FieldNone {
		b = a.ZoneSrc.appendText(append(b, "zone="...))
		b = append(b, ',')
	} else if a.Zone != 0 {
		b = appendUint(append(b, "zone="...), uint64(a.Zone))
		b = append(b, ',')
	}
	if a.NAT != nil {
		b = append(a.NAT.appendText(b), ',')
	}
	if len(a.Exec) > 0 {
		b = appendActions(append(b, "exec("...), a.Exec)
		b = append(b, "),"...)
	}
	switch a.Alg {
	case 0:
	case 21:
		b = append(b, "alg=ftp,"...)
	case 69:
		b = append(b, "alg=tftp,"...)
	default:
		b = appendUint(append(b, "alg="...), uint64(a.Alg))
		b = append(b, ',')
	}
	if b[len(b)-1] == ',' && len(b)-start > 3 {
		b = b[:len(b)-1]
	}
	return append(b, ')')
}
func (a CT) String() string { return string(a.appendText(nil)) }

// NAT flags.
const (
	NATSrc        uint16 = 1
	NATDst        uint16 = 2
	NATPersistent uint16 = 4
	NATProtoHash  uint16 = 8
	NATRandom     uint16 = 16
)

// NAT describes ct(nat(...)). Flags holds NATSrc or NATDst plus options;
// the zero-valued address/port ranges are omitted. With neither NATSrc nor
// NATDst it is plain "nat" (reverse an existing NAT).
type NAT struct {
	Flags            uint16
	MinAddr, MaxAddr netip.Addr
	MinPort, MaxPort uint16
}

func (a *NAT) appendAction(b []byte) ([]byte, error) {
	if a.Flags&(NATSrc|NATDst) == NATSrc|NATDst {
		return b, encodeError("nat", "src and dst are exclusive")
	}
	if a.MaxAddr.IsValid() && (!a.MinAddr.IsValid() || a.MinAddr.Is4() != a.MaxAddr.Is4()) {
		return b, encodeError("nat", "address range %v-%v mixes families or lacks a minimum", a.MinAddr, a.MaxAddr)
	}
	b, s := beginNX(b, nxNAT)
	b = zeros(b, 2)
	b = put16(b, a.Flags)
	var present uint16
	if a.MinAddr.Is4() {
		present |= 1
		if a.MaxAddr.IsValid() {
			present |= 2
		}
	} else if a.MinAddr.Is6() {
		present |= 4
		if a.MaxAddr.IsValid() {
			present |= 8
		}
	}
	if a.MinPort != 0 {
		present |= 16
		if a.MaxPort != 0 {
			present |= 32
		}
	}
	b = put16(b, present)
	if present&1 != 0 {
		v := a.MinAddr.As4()
		b = append(b, v[:]...)
	}
	if present&2 != 0 {
		v := a.MaxAddr.Unmap().As4()
		b = append(b, v[:]...)
	}
	if present&4 != 0 {
		v := a.MinAddr.As16()
		b = append(b, v[:]...)
	}
	if present&8 != 0 {
		v := a.MaxAddr.As16()
		b = append(b, v[:]...)
	}
	if present&16 != 0 {
		b = put16(b, a.MinPort)
	}
	if present&32 != 0 {
		b = put16(b, a.MaxPort)
	}
	return endAction(b, s), nil
}

func (a *NAT) appendText(b []byte) []byte {
	b = append(b, "nat"...)
	if a.Flags&(NATSrc|NATDst) == 0 {
		return b
	}
	b = append(b, '(')
	if a.Flags&NATSrc != 0 {
		b = append(b, "src"...)
	} else {
		b = append(b, "dst"...)
	}
	if a.MinAddr.IsValid() {
		b = append(b, '=')
		bracket := a.MinAddr.Is6() && a.MinPort != 0
		appendAddr := func(b []byte, x netip.Addr) []byte {
			if bracket {
				return append(x.AppendTo(append(b, '[')), ']')
			}
			return x.AppendTo(b)
		}
		b = appendAddr(b, a.MinAddr)
		if a.MaxAddr.IsValid() && !a.MaxAddr.IsUnspecified() && a.MaxAddr != a.MinAddr {
			b = appendAddr(append(b, '-'), a.MaxAddr)
		}
		if a.MinPort != 0 {
			b = appendUint(append(b, ':'), uint64(a.MinPort))
			if a.MaxPort != 0 && a.MaxPort != a.MinPort {
				b = appendUint(append(b, '-'), uint64(a.MaxPort))
			}
		}
		if a.Flags&NATPersistent != 0 {
			b = append(b, ",persistent"...)
		}
		if a.Flags&NATProtoHash != 0 {
			b = append(b, ",hash"...)
		}
		if a.Flags&NATRandom != 0 {
			b = append(b, ",random"...)
		}
	}
	return append(b, ')')
}

// PacketInReason values (OpenFlow 1.5 ofp_packet_in_reason).
type PacketInReason uint8

const (
	ReasonNoMatch    PacketInReason = 0
	ReasonAction     PacketInReason = 1
	ReasonInvalidTTL PacketInReason = 2
	ReasonActionSet  PacketInReason = 3
	ReasonGroup      PacketInReason = 4
	ReasonPacketOut  PacketInReason = 5
)

var reasonNames = [...]string{"no_match", "action", "invalid_ttl", "action_set", "group", "packet_out"}

func (r PacketInReason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "reason" + string(appendUint(nil, uint64(r)))
}

// Controller sends the packet to the controller with OVS's extended
// controller action (NXAST_CONTROLLER2). Reason's zero value is no_match:
// set ReasonAction for an ordinary "send to controller". MaxLen 0 means
// the whole packet; MeterID 0 means no controller meter.
type Controller struct {
	MaxLen   uint16
	ID       uint16
	Reason   PacketInReason
	Userdata []byte
	Pause    bool
	MeterID  uint32
}

func appendProp(b []byte, typ uint16, val []byte) []byte {
	start := len(b)
	b = put16(b, typ)
	b = put16(b, uint16(4+len(val)))
	b = append(b, val...)
	return pad8(b, start)
}

func (a Controller) appendAction(b []byte) ([]byte, error) {
	b, s := beginNX(b, nxCtrl2)
	b = zeros(b, 6)
	var tmp [4]byte
	if a.MaxLen != 0 && a.MaxLen != 0xffff {
		putBE(tmp[:2], uint64(a.MaxLen))
		b = appendProp(b, 0, tmp[:2])
	}
	if a.ID != 0 {
		putBE(tmp[:2], uint64(a.ID))
		b = appendProp(b, 1, tmp[:2])
	}
	if a.Reason != ReasonAction {
		b = appendProp(b, 2, []byte{byte(a.Reason)})
	}
	if len(a.Userdata) > 0 {
		b = appendProp(b, 3, a.Userdata)
	}
	if a.Pause {
		b = appendProp(b, 4, nil)
	}
	if a.MeterID != 0 {
		putBE(tmp[:], uint64(a.MeterID))
		b = appendProp(b, 5, tmp[:])
	}
	return endAction(b, s), nil
}

func (a Controller) appendText(b []byte) []byte {
	if a.Reason == ReasonAction && a.ID == 0 && len(a.Userdata) == 0 && !a.Pause && a.MeterID == 0 {
		return Output{Port: PortController, MaxLen: a.MaxLen}.appendText(b)
	}
	b = append(b, "controller("...)
	if a.Reason != ReasonAction {
		b = append(append(b, "reason="...), a.Reason.String()...)
		b = append(b, ',')
	}
	if a.MaxLen != 0 && a.MaxLen != 0xffff {
		b = appendUint(append(b, "max_len="...), uint64(a.MaxLen))
		b = append(b, ',')
	}
	if a.ID != 0 {
		b = appendUint(append(b, "id="...), uint64(a.ID))
		b = append(b, ',')
	}
	if len(a.Userdata) > 0 {
		b = appendHexDots(append(b, "userdata="...), a.Userdata)
		b = append(b, ',')
	}
	if a.Pause {
		b = append(b, "pause,"...)
	}
	if a.MeterID != 0 {
		b = appendUint(append(b, "meter_id="...), uint64(a.MeterID))
		b = append(b, ',')
	}
	b = b[:len(b)-1]
	return append(b, ')')
}
func (a Controller) String() string { return string(a.appendText(nil)) }

// appendActions renders a list of actions separated by commas.
func appendActions(b []byte, acts []Action) []byte {
	for i, a := range acts {
		if i > 0 {
			b = append(b, ',')
		}
		b = a.appendText(b)
	}
	return b
}

func appendActionList(b []byte, acts []Action) ([]byte, error) {
	var err error
	for _, a := range acts {
		if a == nil {
			return b, encodeError("actions", "nil action")
		}
		if b, err = a.appendAction(b); err != nil {
			return b, err
		}
	}
	return b, nil
}

func (a *NAT) String() string { return string(a.appendText(nil)) }
