package flow

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// ActionKind identifies an action.
type ActionKind uint8

const (
	ActOutput      ActionKind = iota + 1 // output:Port
	ActOutputField                       // output:<register field>
	ActInPort                            // output back to the ingress port
	ActController                        // send to the host (packet-in) with Userdata
	ActSetField                          // set_field of a packet header (SetKind/Value)
	ActLoadField                         // load a constant into a register field
	ActMoveField                         // copy one register field into another
	ActCT                                // conntrack
	ActGroup                             // apply a group (plugin-local ID)
	ActMeter                             // apply a meter (plugin-local ID)
	ActDecTTL                            // decrement IP TTL
	ActPushVLAN                          // push an 802.1Q header
	ActPopVLAN                           // pop the outer VLAN header
	ActNormal                            // OVS NORMAL L2 switching
	ActConjunction                       // clause Clause of NClauses of conjunction Uint (see Conjunction)
	numActionKinds
)

// Valid reports whether k is a known action kind.
func (k ActionKind) Valid() bool { return k > 0 && k < numActionKinds }

// Reserved OpenFlow port numbers usable with Output.
const (
	PortInPort     uint32 = 0xfffffff8
	PortLocal      uint32 = 0xfffffffe
	PortController uint32 = 0xfffffffd
)

// CT describes a conntrack action.
type CT struct {
	Commit bool
	Zone   uint16
	// Resume is where the packet continues after conntrack (ct(table=...)).
	// It must be a forward jump; JumpNone means the packet is not recirculated.
	Resume Jump
	// SetMark, if MarkMask != 0, stores Mark under MarkMask in ct_mark on commit.
	Mark, MarkMask uint32
	// NAT applies the NAT recorded in the connection (ct(nat)).
	NAT bool
}

// Action is one OpenFlow action. Build actions with the constructors
// (Output, LoadField, ...); the fields are exported for wire conversions.
type Action struct {
	Kind     ActionKind
	Port     uint32    // ActOutput; ActConjunction: clause<<8 | number of clauses
	Field    Field     // ActOutputField, ActLoadField (destination), ActMoveField (destination)
	From     Field     // ActMoveField source
	SetKind  MatchKind // ActSetField: which header
	Value    []byte    // ActSetField (Kind.Size() bytes)
	Uint     uint64    // ActLoadField value; ActGroup/ActMeter ID; ActPushVLAN TPID
	MaxLen   uint16    // ActController
	Userdata []byte    // ActController
	CT       *CT       // ActCT
}

func Output(port uint32) Action        { return Action{Kind: ActOutput, Port: port} }
func OutputField(f Field) Action       { return Action{Kind: ActOutputField, Field: f} }
func OutputInPort() Action             { return Action{Kind: ActInPort} }
func Normal() Action                   { return Action{Kind: ActNormal} }
func DecTTL() Action                   { return Action{Kind: ActDecTTL} }
func PopVLAN() Action                  { return Action{Kind: ActPopVLAN} }
func PushVLAN(tpid uint16) Action      { return Action{Kind: ActPushVLAN, Uint: uint64(tpid)} }
func ApplyGroup(localID uint32) Action { return Action{Kind: ActGroup, Uint: uint64(localID)} }
func ApplyMeter(localID uint32) Action { return Action{Kind: ActMeter, Uint: uint64(localID)} }
func Conntrack(ct CT) Action           { c := ct; return Action{Kind: ActCT, CT: &c} }
func LoadField(f Field, v uint32) Action {
	return Action{Kind: ActLoadField, Field: f, Uint: uint64(v)}
}
func MoveField(from, to Field) Action { return Action{Kind: ActMoveField, From: from, Field: to} }

// Conjunction makes the flow clause clause (1-based) of nClauses of
// conjunctive match id: a packet matching one flow of every clause then
// matches the flow that has ConjID(id). A rule with N peers, M pods and K
// ports so costs N+M+K flows instead of N×M×K. A flow with a conjunction
// action may hold only conjunction actions and no jump.
func Conjunction(id uint32, clause, nClauses uint8) Action {
	return Action{Kind: ActConjunction, Uint: uint64(id), Port: uint32(clause)<<8 | uint32(nClauses)}
}

// ConjunctionClause returns the clause and clause count of an
// ActConjunction action.
func (a Action) ConjunctionClause() (clause, nClauses uint8) {
	return uint8(a.Port >> 8), uint8(a.Port)
}

// Controller sends the packet to the host, which hands it to the plugin that
// owns the table (PacketInHandler). Userdata comes back with the packet.
func Controller(maxLen uint16, userdata []byte) Action {
	return Action{Kind: ActController, MaxLen: maxLen, Userdata: userdata}
}

func SetEthSrc(mac net.HardwareAddr) Action {
	return Action{Kind: ActSetField, SetKind: MatchEthSrc, Value: []byte(mac)}
}
func SetEthDst(mac net.HardwareAddr) Action {
	return Action{Kind: ActSetField, SetKind: MatchEthDst, Value: []byte(mac)}
}
func SetIPv4Src(a netip.Addr) Action {
	b := a.As4()
	return Action{Kind: ActSetField, SetKind: MatchIPv4Src, Value: b[:]}
}
func SetIPv4Dst(a netip.Addr) Action {
	b := a.As4()
	return Action{Kind: ActSetField, SetKind: MatchIPv4Dst, Value: b[:]}
}
func SetTunDst(a netip.Addr) Action {
	b := a.As4()
	return Action{Kind: ActSetField, SetKind: MatchTunDst, Value: b[:]}
}
func SetTunID(id uint64) Action {
	return Action{Kind: ActSetField, SetKind: MatchTunID, Value: be(8, id)}
}

// The ARP setters rewrite an ARP packet in place, which is how a plugin
// answers ARP from the switch itself (turn a request into a reply and send
// it back out of the port it came in on).
func SetARPOp(op uint16) Action {
	return Action{Kind: ActSetField, SetKind: MatchARPOp, Value: be(2, uint64(op))}
}
func SetARPSha(mac net.HardwareAddr) Action {
	return Action{Kind: ActSetField, SetKind: MatchARPSha, Value: []byte(mac)}
}
func SetARPTha(mac net.HardwareAddr) Action {
	return Action{Kind: ActSetField, SetKind: MatchARPTha, Value: []byte(mac)}
}
func SetARPSpa(a netip.Addr) Action {
	b := a.As4()
	return Action{Kind: ActSetField, SetKind: MatchARPSpa, Value: b[:]}
}
func SetARPTpa(a netip.Addr) Action {
	b := a.As4()
	return Action{Kind: ActSetField, SetKind: MatchARPTpa, Value: b[:]}
}
func SetVlanVID(vid uint16) Action {
	return Action{Kind: ActSetField, SetKind: MatchVlanVID, Value: be(2, uint64(vid))}
}

// Validate checks the action's own shape (not ownership or allocation,
// which only the host can judge).
func (a Action) Validate() error {
	switch a.Kind {
	case ActOutput, ActInPort, ActNormal, ActDecTTL, ActPopVLAN, ActGroup, ActMeter:
		return nil
	case ActPushVLAN:
		if a.Uint != 0x8100 && a.Uint != 0x88a8 {
			return fmt.Errorf("push_vlan: TPID %#x, want 0x8100 or 0x88a8", a.Uint)
		}
	case ActOutputField:
		return a.Field.Validate()
	case ActLoadField:
		if err := a.Field.Validate(); err != nil {
			return fmt.Errorf("load: %w", err)
		}
		if a.Field.Width < 32 && a.Uint>>a.Field.Width != 0 {
			return fmt.Errorf("load: value %#x does not fit field %q of %d bits", a.Uint, a.Field.Name, a.Field.Width)
		}
	case ActMoveField:
		if err := a.From.Validate(); err != nil {
			return fmt.Errorf("move source: %w", err)
		}
		if err := a.Field.Validate(); err != nil {
			return fmt.Errorf("move destination: %w", err)
		}
		if a.From.Width != a.Field.Width {
			return fmt.Errorf("move %q -> %q: widths differ (%d vs %d)", a.From.Name, a.Field.Name, a.From.Width, a.Field.Width)
		}
	case ActController:
		return nil
	case ActSetField:
		switch a.SetKind {
		case MatchEthSrc, MatchEthDst, MatchIPv4Src, MatchIPv4Dst, MatchTunDst, MatchTunID, MatchVlanVID,
			MatchARPOp, MatchARPSpa, MatchARPTpa, MatchARPSha, MatchARPTha:
		default:
			return fmt.Errorf("set_field of %s is not supported", a.SetKind)
		}
		if len(a.Value) != a.SetKind.Size() {
			return fmt.Errorf("set_field %s: value is %d bytes, want %d", a.SetKind, len(a.Value), a.SetKind.Size())
		}
	case ActConjunction:
		k, n := a.ConjunctionClause()
		if n < 2 || n > 64 || k < 1 || k > n || a.Port>>16 != 0 || a.Uint > 0xffffffff {
			return fmt.Errorf("conjunction(%d,%d/%d): need an id of 32 bits, 2 <= clauses <= 64 and 1 <= clause <= clauses", a.Uint, k, n)
		}
	case ActCT:
		if a.CT == nil {
			return fmt.Errorf("ct action without parameters")
		}
	default:
		return fmt.Errorf("unknown action kind %d", a.Kind)
	}
	return nil
}

// Jumps returns the jump an action carries (only ct(table=...)).
func (a Action) jump() Jump {
	if a.Kind == ActCT && a.CT != nil {
		return a.CT.Resume
	}
	return Jump{}
}

// String renders the action in ovs-ofctl syntax; register fields and jumps
// print symbolically.
func (a Action) String() string { return a.Format(DefaultPrinter) }

// Printer lets the host render resolved register bits and table IDs.
type Printer struct {
	Field func(Field) string
	Jump  func(Jump) string
}

// DefaultPrinter prints fields and jumps symbolically.
var DefaultPrinter = Printer{
	Field: func(f Field) string { return "reg:" + f.Name },
	Jump:  func(j Jump) string { return j.String() },
}

// Format renders the action with p.
func (a Action) Format(p Printer) string {
	switch a.Kind {
	case ActOutput:
		switch a.Port {
		case PortInPort:
			return "IN_PORT"
		case PortLocal:
			return "LOCAL"
		case PortController:
			return "CONTROLLER"
		}
		return fmt.Sprintf("output:%d", a.Port)
	case ActOutputField:
		return "output:" + p.Field(a.Field)
	case ActInPort:
		return "IN_PORT"
	case ActNormal:
		return "NORMAL"
	case ActConjunction:
		k, n := a.ConjunctionClause()
		return fmt.Sprintf("conjunction(%d,%d/%d)", a.Uint, k, n)
	case ActDecTTL:
		return "dec_ttl"
	case ActPopVLAN:
		return "pop_vlan"
	case ActPushVLAN:
		return fmt.Sprintf("push_vlan:%#x", a.Uint)
	case ActGroup:
		return fmt.Sprintf("group:%d", a.Uint)
	case ActMeter:
		return fmt.Sprintf("meter:%d", a.Uint)
	case ActLoadField:
		return fmt.Sprintf("load:%#x->%s", a.Uint, p.Field(a.Field))
	case ActMoveField:
		return fmt.Sprintf("move:%s->%s", p.Field(a.From), p.Field(a.Field))
	case ActController:
		s := fmt.Sprintf("controller(max_len=%d", a.MaxLen)
		if len(a.Userdata) > 0 {
			s += fmt.Sprintf(",userdata=%x", a.Userdata)
		}
		return s + ")"
	case ActSetField:
		f := MatchField{Kind: a.SetKind, Value: a.Value}
		return "set_field:" + f.valueString() + "->" + a.SetKind.String()
	case ActCT:
		if a.CT == nil {
			return "ct()"
		}
		var args []string
		if a.CT.Commit {
			args = append(args, "commit")
		}
		if a.CT.Zone != 0 {
			args = append(args, fmt.Sprintf("zone=%d", a.CT.Zone))
		}
		if a.CT.Resume.Kind != JumpNone {
			args = append(args, "table="+p.Jump(a.CT.Resume))
		}
		if a.CT.NAT {
			args = append(args, "nat")
		}
		if a.CT.MarkMask != 0 {
			args = append(args, fmt.Sprintf("exec(set_field:%#x/%#x->ct_mark)", a.CT.Mark, a.CT.MarkMask))
		}
		return "ct(" + strings.Join(args, ",") + ")"
	}
	return fmt.Sprintf("action(%d)", a.Kind)
}
