package openflow

// DefaultPriority is OpenFlow's default flow priority; OVS omits it from
// its text form.
const DefaultPriority uint16 = 0x8000

// Instruction is one OpenFlow 1.5 instruction of a flow.
type Instruction interface {
	appendInstruction(b []byte) ([]byte, error)
	appendText(b []byte) []byte
}

// ApplyActions runs actions immediately, in order.
type ApplyActions struct{ Actions []Action }

// WriteActions merges actions into the action set.
type WriteActions struct{ Actions []Action }

// ClearActions empties the action set.
type ClearActions struct{}

// GotoTable continues the pipeline in Table (must be greater than the
// current table).
type GotoTable struct{ Table uint8 }

// WriteMetadata sets the metadata bits selected by Mask.
type WriteMetadata struct{ Metadata, Mask uint64 }

// Apply is shorthand for ApplyActions{actions}.
func Apply(actions ...Action) ApplyActions { return ApplyActions{Actions: actions} }

// Goto is shorthand for GotoTable{t}.
func Goto(t uint8) GotoTable { return GotoTable{Table: t} }

const (
	itGotoTable     uint16 = 1
	itWriteMetadata uint16 = 2
	itWriteActions  uint16 = 3
	itApplyActions  uint16 = 4
	itClearActions  uint16 = 5
)

func appendActionsInstr(b []byte, typ uint16, acts []Action) ([]byte, error) {
	start := len(b)
	b = put16(b, typ)
	b = put16(b, 0)
	b = zeros(b, 4)
	b, err := appendActionList(b, acts)
	setLen16(b, start+2, len(b)-start)
	return b, err
}

func (i ApplyActions) appendInstruction(b []byte) ([]byte, error) {
	return appendActionsInstr(b, itApplyActions, i.Actions)
}
func (i ApplyActions) appendText(b []byte) []byte { return appendActions(b, i.Actions) }

func (i WriteActions) appendInstruction(b []byte) ([]byte, error) {
	return appendActionsInstr(b, itWriteActions, i.Actions)
}
func (i WriteActions) appendText(b []byte) []byte {
	return append(appendActions(append(b, "write_actions("...), i.Actions), ')')
}

func (ClearActions) appendInstruction(b []byte) ([]byte, error) {
	b = put16(b, itClearActions)
	b = put16(b, 8)
	return zeros(b, 4), nil
}
func (ClearActions) appendText(b []byte) []byte { return append(b, "clear_actions"...) }

func (i GotoTable) appendInstruction(b []byte) ([]byte, error) {
	b = put16(b, itGotoTable)
	b = put16(b, 8)
	b = put8(b, i.Table)
	return zeros(b, 3), nil
}
func (i GotoTable) appendText(b []byte) []byte {
	return appendUint(append(b, "goto_table:"...), uint64(i.Table))
}

func (i WriteMetadata) appendInstruction(b []byte) ([]byte, error) {
	b = put16(b, itWriteMetadata)
	b = put16(b, 24)
	b = zeros(b, 4)
	b = put64(b, i.Metadata)
	return put64(b, i.Mask), nil
}
func (i WriteMetadata) appendText(b []byte) []byte {
	b = appendHex(append(b, "write_metadata:"...), i.Metadata)
	if i.Mask != ^uint64(0) {
		b = appendHex(append(b, '/'), i.Mask)
	}
	return b
}

// AppendInstructionsText renders instructions as the "actions=" part of
// a dump-flows line ("drop" when there is nothing to do).
func AppendInstructionsText(b []byte, ins []Instruction) []byte {
	start := len(b)
	for _, in := range ins {
		if a, ok := in.(ApplyActions); ok && len(a.Actions) == 0 {
			continue
		}
		if len(b) > start {
			b = append(b, ',')
		}
		b = in.appendText(b)
	}
	if len(b) == start {
		b = append(b, "drop"...)
	}
	return b
}

// FlowFlags are OFPFF_* flow flags.
type FlowFlags uint16

const (
	FlagSendFlowRem  FlowFlags = 1
	FlagCheckOverlap FlowFlags = 2
	FlagResetCounts  FlowFlags = 4
	FlagNoPktCounts  FlowFlags = 8
	FlagNoBytCounts  FlowFlags = 16
)

// Flow is one OpenFlow flow: where it lives, what it matches, what it
// does. It is the unit the host installs, dumps and compares.
type Flow struct {
	Table       uint8
	Priority    uint16
	Cookie      uint64
	IdleTimeout uint16
	HardTimeout uint16
	Flags       FlowFlags
	Importance  uint16
	Match       Match
	// Instructions in OpenFlow order: apply_actions, clear_actions,
	// write_actions, write_metadata, goto_table.
	Instructions []Instruction
}

// AppendText appends the flow exactly as `ovs-ofctl --no-stats
// dump-flows` prints it, e.g.
// "cookie=0x5, table=3, priority=100,ip,nw_src=10.0.0.1 actions=goto_table:4".
func (f *Flow) AppendText(b []byte) []byte {
	if f.Cookie != 0 {
		b = appendHex(append(b, "cookie="...), f.Cookie)
		b = append(b, ", "...)
	}
	if f.Table != 0 {
		b = appendUint(append(b, "table="...), uint64(f.Table))
		b = append(b, ", "...)
	}
	if f.IdleTimeout != 0 {
		b = appendUint(append(b, "idle_timeout="...), uint64(f.IdleTimeout))
		b = append(b, ", "...)
	}
	if f.HardTimeout != 0 {
		b = appendUint(append(b, "hard_timeout="...), uint64(f.HardTimeout))
		b = append(b, ", "...)
	}
	if f.Flags&FlagSendFlowRem != 0 {
		b = append(b, "send_flow_rem "...)
	}
	if f.Flags&FlagCheckOverlap != 0 {
		b = append(b, "check_overlap "...)
	}
	if f.Flags&FlagResetCounts != 0 {
		b = append(b, "reset_counts "...)
	}
	if f.Flags&FlagNoPktCounts != 0 {
		b = append(b, "no_packet_counts "...)
	}
	if f.Flags&FlagNoBytCounts != 0 {
		b = append(b, "no_byte_counts "...)
	}
	if f.Importance != 0 {
		b = appendUint(append(b, "importance="...), uint64(f.Importance))
		b = append(b, ", "...)
	}
	b = f.Match.AppendText(b, f.Priority)
	if len(b) > 0 && b[len(b)-1] != ' ' {
		b = append(b, ' ')
	}
	b = append(b, "actions="...)
	return AppendInstructionsText(b, f.Instructions)
}

// String returns AppendText's rendering.
func (f *Flow) String() string { return string(f.AppendText(nil)) }

// FlowModCommand is the OFPFC_* command of a flow mod.
type FlowModCommand uint8

const (
	FlowAdd          FlowModCommand = 0
	FlowModify       FlowModCommand = 1
	FlowModifyStrict FlowModCommand = 2
	FlowDelete       FlowModCommand = 3
	FlowDeleteStrict FlowModCommand = 4
)

var flowCmdNames = [...]string{"ADD", "MOD", "MOD_STRICT", "DEL", "DEL_STRICT"}

func (c FlowModCommand) String() string {
	if int(c) < len(flowCmdNames) {
		return flowCmdNames[c]
	}
	return "cmd" + string(appendUint(nil, uint64(c)))
}

// FlowMod adds, modifies or deletes flows. For Modify/Delete, CookieMask
// selects flows whose cookie matches Flow.Cookie under the mask, and for
// the non-strict commands Flow.Table may be TableAll.
type FlowMod struct {
	Command    FlowModCommand
	Flow       Flow
	CookieMask uint64
	// OutPort / OutGroup filter deletes; 0 means any.
	OutPort  uint32
	OutGroup uint32
}

// AddFlow returns the FlowMod that adds f.
func AddFlow(f Flow) FlowMod { return FlowMod{Command: FlowAdd, Flow: f} }

// DeleteCookie returns the FlowMod that deletes, in every table, the
// flows whose cookie equals cookie in the bits set in mask.
func DeleteCookie(cookie, mask uint64) FlowMod {
	return FlowMod{Command: FlowDelete, Flow: Flow{Table: TableAll, Cookie: cookie}, CookieMask: mask}
}

// TableAll addresses every table in delete and flow stats requests.
const TableAll uint8 = 0xff

func (m *FlowMod) msgType() uint8 { return typeFlowMod }

func (m *FlowMod) appendBody(b []byte) ([]byte, error) {
	f := &m.Flow
	// Refuse matches OVS would reject, with an error that says why,
	// rather than a bare OFPBMC_BAD_PREREQ from the switch.
	if err := f.Match.Validate(); err != nil {
		return b, err
	}
	b = put64(b, f.Cookie)
	b = put64(b, m.CookieMask)
	b = put8(b, f.Table)
	b = put8(b, uint8(m.Command))
	b = put16(b, f.IdleTimeout)
	b = put16(b, f.HardTimeout)
	b = put16(b, f.Priority)
	b = put32(b, 0xffffffff) // buffer_id: none
	op, og := m.OutPort, m.OutGroup
	if op == 0 {
		op = PortAny
	}
	if og == 0 {
		og = 0xffffffff
	}
	b = put32(b, op)
	b = put32(b, og)
	b = put16(b, uint16(f.Flags))
	b = put16(b, f.Importance)
	b = appendMatch(b, f.Match)
	return appendInstructions(b, f.Instructions)
}

func appendInstructions(b []byte, ins []Instruction) ([]byte, error) {
	var err error
	for _, in := range ins {
		if in == nil {
			return b, encodeError("instructions", "nil instruction")
		}
		if b, err = in.appendInstruction(b); err != nil {
			return b, err
		}
	}
	return b, nil
}

func decodeFlowMod(r *reader) (*FlowMod, error) {
	m := &FlowMod{}
	f := &m.Flow
	f.Cookie = r.u64()
	m.CookieMask = r.u64()
	f.Table = r.u8()
	m.Command = FlowModCommand(r.u8())
	f.IdleTimeout = r.u16()
	f.HardTimeout = r.u16()
	f.Priority = r.u16()
	r.u32() // buffer id
	m.OutPort = r.u32()
	m.OutGroup = r.u32()
	if m.OutPort == PortAny {
		m.OutPort = 0
	}
	if m.OutGroup == 0xffffffff {
		m.OutGroup = 0
	}
	f.Flags = FlowFlags(r.u16())
	f.Importance = r.u16()
	var err error
	if f.Match, err = decodeMatch(r); err != nil {
		return nil, err
	}
	ins := r.sub(r.left(), "instructions")
	if f.Instructions, err = decodeInstructions(&ins); err != nil {
		return nil, err
	}
	return m, nil
}

func decodeInstructions(r *reader) ([]Instruction, error) {
	var out []Instruction
	for r.left() > 0 {
		start := r.off
		typ := r.u16()
		n := int(r.u16())
		if r.err != nil {
			return nil, r.err
		}
		if n < 8 || n%8 != 0 {
			r.failf(ErrBadLength, "instruction")
			return nil, r.err
		}
		r.off = start
		sv := r.sub(n, "instruction")
		s := &sv
		s.skip(4)
		switch typ {
		case itGotoTable:
			out = append(out, GotoTable{Table: s.u8()})
		case itWriteMetadata:
			s.skip(4)
			out = append(out, WriteMetadata{Metadata: s.u64(), Mask: s.u64()})
		case itApplyActions, itWriteActions:
			s.skip(4)
			acts, err := decodeActions(s)
			if err != nil {
				return nil, err
			}
			if typ == itApplyActions {
				out = append(out, ApplyActions{Actions: acts})
			} else {
				out = append(out, WriteActions{Actions: acts})
			}
		case itClearActions:
			out = append(out, ClearActions{})
		default:
			r.off = start
			r.failf(ErrUnknownType, "instruction type "+string(appendUint(nil, uint64(typ))))
			return nil, r.err
		}
		if s.err != nil {
			return nil, s.err
		}
	}
	return out, r.err
}

// String renders the flow mod for logs and errors: the command, then the
// flow in dump-flows syntax, e.g. "ADD table=3, priority=7,ip actions=drop",
// and the cookie mask when there is one.
func (m *FlowMod) String() string {
	b := append([]byte(m.Command.String()), ' ')
	b = m.Flow.AppendText(b)
	if m.CookieMask != 0 {
		b = appendHex(append(b, " cookie_mask="...), m.CookieMask)
	}
	return string(b)
}
