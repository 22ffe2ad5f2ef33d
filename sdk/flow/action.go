package flow

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Action is one OpenFlow action. Each kind of action is its own type (the
// Act* types below), built with the constructors (Output, LoadField,
// Conntrack, ...) or as a composite literal (&ActOutput{Port: 3}); a type
// carries exactly the parameters its kind has. The set is closed: only
// this package defines actions, because every one needs a wire form and a
// host translation (see "Adding an action" in doc.go).
//
// An action value is shared by every flow that holds it: do not change it
// after handing it to a flow.
type Action interface {
	// Validate checks the action's own shape (not ownership or
	// allocation, which only the host can judge).
	Validate() error
	// Format renders the action with p (see Printer).
	Format(p Printer) string
	// String renders the action symbolically (DefaultPrinter).
	String() string
	isAction()
}

// Reserved OpenFlow port numbers usable with Output.
const (
	PortInPort     uint32 = 0xfffffff8
	PortLocal      uint32 = 0xfffffffe
	PortController uint32 = 0xfffffffd
)

// Printer lets the host render resolved register bits and table IDs.
type Printer struct {
	// Field renders a register field in load/output/move text.
	Field func(Field) string
	// Jump renders a jump target (ct(table=), resubmit, learn(table=),
	// goto_table). The host calls it once per jump, in text order.
	Jump func(Jump) string
	// Bits, when set, resolves a register field to its bits so that
	// actions whose ovs-ofctl text names registers in NXM form
	// (move:NXM_NX_REG3[0..15]->..., learn(...)) print exactly as
	// ovs-ofctl does.
	Bits func(Field) (Bits, bool)
	// Cookie is the cookie the host gives flows a learn action adds (the
	// learning flow's prefix and tag, in the reserved learned round);
	// learn(...) prints it.
	Cookie uint64
	// GroupID and MeterID, when set, map the plugin's local group and
	// meter IDs to the switch's (the host prints those).
	GroupID, MeterID func(uint32) uint32
}

func (p Printer) group(id uint32) uint32 {
	if p.GroupID == nil {
		return id
	}
	return p.GroupID(id)
}

func (p Printer) meter(id uint32) uint32 {
	if p.MeterID == nil {
		return id
	}
	return p.MeterID(id)
}

// DefaultPrinter prints fields and jumps symbolically.
var DefaultPrinter = Printer{
	Field: func(f Field) string { return "reg:" + f.Name },
	Jump:  func(j Jump) string { return j.String() },
}

// JumpOf returns the jump an action carries: a ct(table=) resume, a
// resubmit target, or the table a learn action writes into (always a
// GotoTable). ok is false for actions without one.
func JumpOf(a Action) (j Jump, ok bool) {
	switch a := a.(type) {
	case *ActCT:
		return a.Resume, a.Resume.Kind != JumpNone
	case *ActResubmit:
		return a.To, true
	case *ActLearn:
		return GotoTable(a.Table), true
	}
	return Jump{}, false
}

// --- output and forwarding ---

// ActOutput sends the packet out of an OpenFlow port.
type ActOutput struct{ Port uint32 }

// ActOutputField sends the packet out of the port held in a register field.
type ActOutputField struct{ Field Field }

// ActInPort sends the packet back out of the port it came in on.
type ActInPort struct{}

// ActNormal hands the packet to OVS's NORMAL L2 switching.
type ActNormal struct{}

func Output(port uint32) Action  { return &ActOutput{Port: port} }
func OutputField(f Field) Action { return &ActOutputField{Field: f} }
func OutputInPort() Action       { return &ActInPort{} }
func Normal() Action             { return &ActNormal{} }

func (*ActOutput) isAction()      {}
func (*ActOutputField) isAction() {}
func (*ActInPort) isAction()      {}
func (*ActNormal) isAction()      {}

func (a *ActOutput) Validate() error      { return nil }
func (a *ActOutputField) Validate() error { return a.Field.Validate() }
func (a *ActInPort) Validate() error      { return nil }
func (a *ActNormal) Validate() error      { return nil }

func (a *ActOutput) Format(Printer) string {
	switch a.Port {
	case PortInPort:
		return "IN_PORT"
	case PortLocal:
		return "LOCAL"
	case PortController:
		return "CONTROLLER"
	}
	return fmt.Sprintf("output:%d", a.Port)
}
func (a *ActOutputField) Format(p Printer) string { return "output:" + Reg(a.Field).nxmText(p) }
func (a *ActInPort) Format(Printer) string        { return "IN_PORT" }
func (a *ActNormal) Format(Printer) string        { return "NORMAL" }

func (a *ActOutput) String() string      { return a.Format(DefaultPrinter) }
func (a *ActOutputField) String() string { return a.Format(DefaultPrinter) }
func (a *ActInPort) String() string      { return a.Format(DefaultPrinter) }
func (a *ActNormal) String() string      { return a.Format(DefaultPrinter) }

// --- controller ---

// ControllerReason is the packet-in reason a controller action reports.
type ControllerReason uint8

const (
	// ReasonAction is the ordinary "sent by a controller action".
	ReasonAction ControllerReason = iota
	// ReasonNoMatch reports the packet as a table miss.
	ReasonNoMatch
	// ReasonInvalidTTL reports a TTL that ran out.
	ReasonInvalidTTL
	numReasons
)

var reasonNames = [...]string{"action", "no_match", "invalid_ttl"}

func (r ControllerReason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// ActController sends the packet to the host, which hands it to the plugin
// that owns the table (PacketInHandler). Userdata comes back with the
// packet. Meter, when non-zero, is one of the plugin's meters (local ID)
// that rate-limits these packet-ins.
type ActController struct {
	MaxLen   uint16
	Userdata []byte
	Reason   ControllerReason
	Meter    uint32
}

// Controller sends the packet to the host (see ActController).
func Controller(maxLen uint16, userdata []byte) Action {
	return &ActController{MaxLen: maxLen, Userdata: userdata}
}

// ControllerMetered sends the packet to the host through meter (a local
// meter ID) with the given reason.
func ControllerMetered(maxLen uint16, userdata []byte, reason ControllerReason, meter uint32) Action {
	return &ActController{MaxLen: maxLen, Userdata: userdata, Reason: reason, Meter: meter}
}

func (*ActController) isAction() {}
func (a *ActController) Validate() error {
	if a.Reason >= numReasons {
		return fmt.Errorf("controller: unknown reason %d", a.Reason)
	}
	if a.Meter > MaxLocalMeterID {
		return fmt.Errorf("controller: meter id %d out of range 1..%d", a.Meter, MaxLocalMeterID)
	}
	return nil
}

// Format prints as ovs-ofctl does, the meter ID mapped by p.
func (a *ActController) Format(p Printer) string {
	var args []string
	if a.Reason != ReasonAction {
		args = append(args, "reason="+a.Reason.String())
	}
	if a.MaxLen != 0 && a.MaxLen != 0xffff {
		args = append(args, fmt.Sprintf("max_len=%d", a.MaxLen))
	}
	if len(a.Userdata) > 0 {
		args = append(args, "userdata="+hexDots(a.Userdata))
	}
	if a.Meter != 0 {
		args = append(args, fmt.Sprintf("meter_id=%d", p.meter(a.Meter)))
	}
	if len(args) == 0 {
		ml := a.MaxLen
		if ml == 0 {
			ml = 0xffff
		}
		return fmt.Sprintf("CONTROLLER:%d", ml)
	}
	return "controller(" + strings.Join(args, ",") + ")"
}
func (a *ActController) String() string { return a.Format(DefaultPrinter) }

func hexDots(d []byte) string {
	var b strings.Builder
	for i, c := range d {
		if i > 0 {
			b.WriteByte('.')
		}
		fmt.Fprintf(&b, "%02x", c)
	}
	return b.String()
}

// --- registers and headers ---

// ActLoad loads a constant into a register field.
type ActLoad struct {
	Field Field
	Value uint32
}

// LoadField loads v into register field f.
func LoadField(f Field, v uint32) Action { return &ActLoad{Field: f, Value: v} }

func (*ActLoad) isAction() {}
func (a *ActLoad) Validate() error {
	if err := a.Field.Validate(); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if a.Field.Width < 32 && a.Value>>a.Field.Width != 0 {
		return fmt.Errorf("load: value %#x does not fit field %q of %d bits", a.Value, a.Field.Name, a.Field.Width)
	}
	return nil
}

// Format prints, resolved (p.Bits), what ovs-ofctl prints for the load:
// set_field of the value and mask shifted into place in the register.
func (a *ActLoad) Format(p Printer) string {
	if p.Bits != nil {
		if b, ok := p.Bits(a.Field); ok {
			v, m := a.Value<<b.Offset&b.Mask(), b.Mask()
			if m == 0xffffffff {
				return fmt.Sprintf("set_field:%#x->reg%d", v, b.Reg)
			}
			return fmt.Sprintf("set_field:%#x/%#x->reg%d", v, m, b.Reg)
		}
	}
	return fmt.Sprintf("load:%#x->%s", a.Value, p.Field(a.Field))
}
func (a *ActLoad) String() string { return a.Format(DefaultPrinter) }

// Operand is a run of bits that move and learn read or write: a register
// field (Reg) or bits of a packet header field (Header, HeaderBits).
// Build it with those functions; the zero Operand is invalid.
type Operand struct {
	field  Field
	header MatchKind
	offset uint8
	width  uint8
}

// Reg is the whole register field f.
func Reg(f Field) Operand { return Operand{field: f} }

// Header is the whole header field k (e.g. MatchIPv4Src).
func Header(k MatchKind) Operand { return Operand{header: k, width: uint8(min(k.Size()*8, 255))} }

// HeaderBits is bits [offset, offset+width) of header field k, counted
// from its least significant bit.
func HeaderBits(k MatchKind, offset, width uint8) Operand {
	return Operand{header: k, offset: offset, width: width}
}

// Reg returns the register field, if the operand is one.
func (o Operand) Reg() (Field, bool) { return o.field, o.field.Name != "" }

// Header returns the header field and bit range, if the operand is one.
func (o Operand) Header() (k MatchKind, offset, width uint8, ok bool) {
	return o.header, o.offset, o.width, o.header != 0 && o.field.Name == ""
}

// Width is the operand's width in bits.
func (o Operand) Width() int {
	if o.field.Name != "" {
		return int(o.field.Width)
	}
	return int(o.width)
}

func (o Operand) validate(write bool) error {
	if o.field.Name != "" {
		if o.header != 0 {
			return fmt.Errorf("operand names both register field %q and header %s", o.field.Name, o.header)
		}
		return o.field.Validate()
	}
	if !o.header.Valid() || o.header == MatchRegField {
		return fmt.Errorf("operand names neither a register field nor a header field")
	}
	info := &matchKinds[o.header]
	if info.nxm == "" {
		return fmt.Errorf("header field %s cannot be moved", o.header)
	}
	if write && !info.writable {
		return fmt.Errorf("header field %s is read-only", o.header)
	}
	if o.width == 0 || int(o.offset)+int(o.width) > o.header.Size()*8 {
		return fmt.Errorf("bits %d..%d are outside header field %s (%d bits)", o.offset, int(o.offset)+int(o.width)-1, o.header, o.header.Size()*8)
	}
	return nil
}

// nxmText renders the operand as ovs-ofctl prints a subfield
// (NXM_OF_IP_SRC[], NXM_NX_REG3[0..15]).
func (o Operand) nxmText(p Printer) string {
	if o.field.Name != "" {
		if p.Bits == nil {
			return p.Field(o.field)
		}
		b, ok := p.Bits(o.field)
		if !ok {
			return p.Field(o.field)
		}
		return subfieldText(fmt.Sprintf("NXM_NX_REG%d", b.Reg), int(b.Offset), int(b.Width), 32)
	}
	if !o.header.Valid() || matchKinds[o.header].nxm == "" {
		return fmt.Sprintf("%s[%d..%d]", o.header, o.offset, int(o.offset)+int(o.width)-1)
	}
	return subfieldText(matchKinds[o.header].nxm, int(o.offset), int(o.width), o.header.Size()*8)
}

func subfieldText(name string, ofs, n, total int) string {
	switch {
	case ofs == 0 && n == total:
		return name + "[]"
	case n == 1:
		return fmt.Sprintf("%s[%d]", name, ofs)
	}
	return fmt.Sprintf("%s[%d..%d]", name, ofs, ofs+n-1)
}

// ActMove copies bits between register fields and packet header fields,
// in either direction (e.g. ip_src into a register, a register into
// eth_dst, eth_src into eth_dst).
type ActMove struct{ From, To Operand }

// MoveField copies register field from into register field to.
func MoveField(from, to Field) Action { return &ActMove{From: Reg(from), To: Reg(to)} }

// Move copies from into to; both must be the same width.
func Move(from, to Operand) Action { return &ActMove{From: from, To: to} }

func (*ActMove) isAction() {}
func (a *ActMove) Validate() error {
	if err := a.From.validate(false); err != nil {
		return fmt.Errorf("move source: %w", err)
	}
	if err := a.To.validate(true); err != nil {
		return fmt.Errorf("move destination: %w", err)
	}
	if a.From.Width() != a.To.Width() {
		return fmt.Errorf("move %s -> %s: widths differ (%d vs %d)", a.From.nxmText(DefaultPrinter), a.To.nxmText(DefaultPrinter), a.From.Width(), a.To.Width())
	}
	return nil
}

// Format prints the move in ovs-ofctl's NXM form; register fields print
// as p.Field names them unless resolved (p.Bits).
func (a *ActMove) Format(p Printer) string {
	return "move:" + a.From.nxmText(p) + "->" + a.To.nxmText(p)
}
func (a *ActMove) String() string { return a.Format(DefaultPrinter) }

// ActSetField writes a packet header field (or its bits under Mask).
// Build it with the Set* constructors.
type ActSetField struct {
	Kind  MatchKind
	Value []byte
	Mask  []byte // nil: the whole field
}

func setField(k MatchKind, v []byte) Action { return &ActSetField{Kind: k, Value: v} }

func SetEthSrc(mac net.HardwareAddr) Action { return setField(MatchEthSrc, []byte(mac)) }
func SetEthDst(mac net.HardwareAddr) Action { return setField(MatchEthDst, []byte(mac)) }
func SetIPv4Src(a netip.Addr) Action        { b := a.As4(); return setField(MatchIPv4Src, b[:]) }
func SetIPv4Dst(a netip.Addr) Action        { b := a.As4(); return setField(MatchIPv4Dst, b[:]) }
func SetIPv6Src(a netip.Addr) Action        { b := a.As16(); return setField(MatchIPv6Src, b[:]) }
func SetIPv6Dst(a netip.Addr) Action        { b := a.As16(); return setField(MatchIPv6Dst, b[:]) }

// SetTunDst sets the tunnel destination of the packet's next tunnel
// output (tun_dst for IPv4, tun_ipv6_dst for IPv6).
func SetTunDst(a netip.Addr) Action {
	if a.Is6() && !a.Is4In6() {
		b := a.As16()
		return setField(MatchTunIPv6Dst, b[:])
	}
	b := a.Unmap().As4()
	return setField(MatchTunDst, b[:])
}
func SetTunID(id uint64) Action { return setField(MatchTunID, be(8, id)) }

// SetPktMark writes the bits of v under mask into the packet mark
// (pkt_mark, the skb mark on the kernel datapath).
func SetPktMark(v, mask uint32) Action {
	a := &ActSetField{Kind: MatchPktMark, Value: be(4, uint64(v&mask))}
	if mask != 0xffffffff {
		a.Mask = be(4, uint64(mask))
	}
	return a
}

// The ARP setters rewrite an ARP packet in place, which is how a plugin
// answers ARP from the switch itself (turn a request into a reply and send
// it back out of the port it came in on).
func SetARPOp(op uint16) Action             { return setField(MatchARPOp, be(2, uint64(op))) }
func SetARPSha(mac net.HardwareAddr) Action { return setField(MatchARPSha, []byte(mac)) }
func SetARPTha(mac net.HardwareAddr) Action { return setField(MatchARPTha, []byte(mac)) }
func SetARPSpa(a netip.Addr) Action         { b := a.As4(); return setField(MatchARPSpa, b[:]) }
func SetARPTpa(a netip.Addr) Action         { b := a.As4(); return setField(MatchARPTpa, b[:]) }
func SetVlanVID(vid uint16) Action          { return setField(MatchVlanVID, be(2, uint64(vid))) }
func SetICMPv6Type(t uint8) Action          { return setField(MatchICMPv6Type, []byte{t}) }
func SetNDTarget(a netip.Addr) Action       { b := a.As16(); return setField(MatchNDTarget, b[:]) }
func SetNDTLL(mac net.HardwareAddr) Action  { return setField(MatchNDTLL, []byte(mac)) }
func SetIPDSCP(dscp uint8) Action           { return setField(MatchIPDSCP, []byte{dscp}) }

// SetL4Port rewrites a transport port: k is one of MatchTCPSrc,
// MatchTCPDst, MatchUDPSrc, MatchUDPDst, MatchSCTPSrc, MatchSCTPDst (the
// switch fixes the checksum). A stateless port translation, for what
// conntrack cannot NAT.
func SetL4Port(k MatchKind, port uint16) Action { return setField(k, be(2, uint64(port))) }

var settable = map[MatchKind]bool{
	MatchEthSrc: true, MatchEthDst: true, MatchIPv4Src: true, MatchIPv4Dst: true, MatchIPv6Src: true, MatchIPv6Dst: true,
	MatchTunDst: true, MatchTunIPv6Dst: true, MatchTunID: true, MatchVlanVID: true, MatchPktMark: true,
	MatchARPOp: true, MatchARPSpa: true, MatchARPTpa: true, MatchARPSha: true, MatchARPTha: true,
	MatchICMPv6Type: true, MatchNDTarget: true, MatchNDTLL: true, MatchIPDSCP: true,
	MatchTCPSrc: true, MatchTCPDst: true, MatchUDPSrc: true, MatchUDPDst: true, MatchSCTPSrc: true, MatchSCTPDst: true,
}

func (*ActSetField) isAction() {}
func (a *ActSetField) Validate() error {
	if !settable[a.Kind] {
		return fmt.Errorf("set_field of %s is not supported", a.Kind)
	}
	if len(a.Value) != a.Kind.Size() {
		return fmt.Errorf("set_field %s: value is %d bytes, want %d", a.Kind, len(a.Value), a.Kind.Size())
	}
	if a.Mask != nil && (a.Kind != MatchPktMark || len(a.Mask) != len(a.Value)) {
		return fmt.Errorf("set_field %s: only pkt_mark is set under a mask, and the mask must be %d bytes", a.Kind, a.Kind.Size())
	}
	return nil
}

// Format prints as ovs-ofctl does ("set_field:10.0.0.1->ip_dst"), except
// that set_field of vlan_vid prints the VLAN ID without OpenFlow's
// "present" bit.
func (a *ActSetField) Format(Printer) string {
	if !a.Kind.Valid() || len(a.Value) != a.Kind.Size() {
		return fmt.Sprintf("set_field:?->%s", a.Kind)
	}
	f := MatchField{Kind: a.Kind, Value: a.Value, Mask: a.Mask}
	v := f.valueString()
	switch a.Kind {
	case MatchPktMark, MatchTunID:
		v = altHex(f.Uint())
		if a.Mask != nil {
			v += "/" + altHex(f.MaskUint())
		}
	case MatchIPDSCP, MatchICMPv6Type:
		v = fmt.Sprintf("%d", f.Uint())
	case MatchVlanVID:
		// The switch sets the VID with OpenFlow's "tag present" bit
		// (0x1000), and ovs-ofctl prints the two together.
		v = fmt.Sprintf("%d", f.Uint()|0x1000)
	}
	return "set_field:" + v + "->" + matchKinds[a.Kind].setName()
}
func (a *ActSetField) String() string { return a.Format(DefaultPrinter) }

// --- simple packet actions ---

// ActDecTTL decrements the IP TTL (IPv6 hop limit).
type ActDecTTL struct{}

// ActPushVLAN pushes an 802.1Q header with the given TPID.
type ActPushVLAN struct{ TPID uint16 }

// ActPopVLAN pops the outer VLAN header.
type ActPopVLAN struct{}

// ActGroup applies one of the plugin's groups (local ID).
type ActGroup struct{ ID uint32 }

// ActMeter passes the packet through one of the plugin's meters (local ID).
type ActMeter struct{ ID uint32 }

// ActCTClear clears the packet's conntrack state, so it can be tracked
// again in another zone.
type ActCTClear struct{}

func DecTTL() Action                   { return &ActDecTTL{} }
func PopVLAN() Action                  { return &ActPopVLAN{} }
func PushVLAN(tpid uint16) Action      { return &ActPushVLAN{TPID: tpid} }
func ApplyGroup(localID uint32) Action { return &ActGroup{ID: localID} }
func ApplyMeter(localID uint32) Action { return &ActMeter{ID: localID} }
func CTClear() Action                  { return &ActCTClear{} }

func (*ActDecTTL) isAction()   {}
func (*ActPushVLAN) isAction() {}
func (*ActPopVLAN) isAction()  {}
func (*ActGroup) isAction()    {}
func (*ActMeter) isAction()    {}
func (*ActCTClear) isAction()  {}

func (a *ActDecTTL) Validate() error  { return nil }
func (a *ActPopVLAN) Validate() error { return nil }
func (a *ActCTClear) Validate() error { return nil }
func (a *ActGroup) Validate() error {
	if a.ID == 0 || a.ID > MaxLocalGroupID {
		return fmt.Errorf("group: id %d out of range 1..%d", a.ID, MaxLocalGroupID)
	}
	return nil
}
func (a *ActMeter) Validate() error {
	if a.ID == 0 || a.ID > MaxLocalMeterID {
		return fmt.Errorf("meter: id %d out of range 1..%d", a.ID, MaxLocalMeterID)
	}
	return nil
}
func (a *ActPushVLAN) Validate() error {
	if a.TPID != 0x8100 && a.TPID != 0x88a8 {
		return fmt.Errorf("push_vlan: TPID %#x, want 0x8100 or 0x88a8", a.TPID)
	}
	return nil
}

func (a *ActDecTTL) Format(Printer) string   { return "dec_ttl" }
func (a *ActPopVLAN) Format(Printer) string  { return "pop_vlan" }
func (a *ActCTClear) Format(Printer) string  { return "ct_clear" }
func (a *ActPushVLAN) Format(Printer) string { return fmt.Sprintf("push_vlan:%#x", a.TPID) }
func (a *ActGroup) Format(p Printer) string  { return fmt.Sprintf("group:%d", p.group(a.ID)) }
func (a *ActMeter) Format(p Printer) string  { return fmt.Sprintf("meter:%d", p.meter(a.ID)) }

func (a *ActDecTTL) String() string   { return a.Format(DefaultPrinter) }
func (a *ActPopVLAN) String() string  { return a.Format(DefaultPrinter) }
func (a *ActCTClear) String() string  { return a.Format(DefaultPrinter) }
func (a *ActPushVLAN) String() string { return a.Format(DefaultPrinter) }
func (a *ActGroup) String() string    { return a.Format(DefaultPrinter) }
func (a *ActMeter) String() string    { return a.Format(DefaultPrinter) }

// --- conjunction ---

// ActConjunction makes the flow clause Clause (1-based) of NClauses of
// conjunctive match ID: a packet matching one flow of every clause then
// matches the flow that has ConjID(ID). A rule with N peers, M pods and K
// ports so costs N+M+K flows instead of N×M×K. A flow with a conjunction
// action may hold only conjunction actions and no jump.
type ActConjunction struct {
	ID               uint32
	Clause, NClauses uint8
}

// Conjunction builds an ActConjunction.
func Conjunction(id uint32, clause, nClauses uint8) Action {
	return &ActConjunction{ID: id, Clause: clause, NClauses: nClauses}
}

func (*ActConjunction) isAction() {}
func (a *ActConjunction) Validate() error {
	if a.NClauses < 2 || a.NClauses > 64 || a.Clause < 1 || a.Clause > a.NClauses {
		return fmt.Errorf("conjunction(%d,%d/%d): need 2 <= clauses <= 64 and 1 <= clause <= clauses", a.ID, a.Clause, a.NClauses)
	}
	return nil
}
func (a *ActConjunction) Format(Printer) string {
	return fmt.Sprintf("conjunction(%d,%d/%d)", a.ID, a.Clause, a.NClauses)
}
func (a *ActConjunction) String() string { return a.Format(DefaultPrinter) }

// --- resubmit and note ---

// ActResubmit runs the packet through another table and then continues
// with the rest of this action list. The target must be a table the plugin
// may write (its own or an exported one) and later than the flow's own
// table: the host refuses backward targets, so the pipeline stays a DAG.
// In a group bucket it is how a bucket continues the pipeline.
type ActResubmit struct{ To Jump }

// Resubmit runs the packet through the table j names (see ActResubmit).
func Resubmit(j Jump) Action { return &ActResubmit{To: j} }

func (*ActResubmit) isAction() {}
func (a *ActResubmit) Validate() error {
	if a.To.Kind == JumpNone {
		return fmt.Errorf("resubmit without a target table")
	}
	return a.To.Validate()
}
func (a *ActResubmit) Format(p Printer) string { return "resubmit(," + p.Jump(a.To) + ")" }
func (a *ActResubmit) String() string          { return a.Format(DefaultPrinter) }

// ActNote carries opaque bytes that show in flow dumps (e.g. the policy a
// flow implements); the switch ignores it.
type ActNote struct{ Data []byte }

// Note builds an ActNote.
func Note(data []byte) Action { return &ActNote{Data: data} }

// MaxNoteLen bounds ActNote.Data.
const MaxNoteLen = 256

func (*ActNote) isAction() {}
func (a *ActNote) Validate() error {
	if len(a.Data) > MaxNoteLen {
		return fmt.Errorf("note: %d bytes, at most %d", len(a.Data), MaxNoteLen)
	}
	return nil
}

// Format prints as ovs-ofctl does: the note padded so the action fills a
// multiple of 8 bytes, the padding shown as zero bytes.
func (a *ActNote) Format(Printer) string {
	n := max(len(a.Data), 6)
	n += (8 - (n+10)%8) % 8
	b := make([]byte, n)
	copy(b, a.Data)
	return "note:" + hexDots(b)
}
func (a *ActNote) String() string { return a.Format(DefaultPrinter) }
