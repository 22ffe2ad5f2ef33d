package ofxlate

// The reverse translation: a flow as the switch holds it (decoded from a
// flow stats reply) back into the SDK terms of the plugin that owns it,
// with symbolic table names and the plugin's named register fields. It is
// what Host.Flows returns, and what podnet's CNI CHECK compares with the
// flows it meant to install.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Reverse is what reading a switch flow back into one plugin's terms
// needs: the plugin, its register fields (its own and the well-known
// ones), its cookie prefix and the table names.
type Reverse struct {
	Owner  string
	Prefix uint16
	Fields map[string]flow.Bits
	// Table names a table ID; ok is false for an unassigned ID.
	Table func(id uint8) (name string, ok bool)

	byBits map[flow.Bits]flow.Field
	byKind map[openflow.Field]flow.MatchKind
}

func (r *Reverse) init() {
	if r.byBits != nil {
		return
	}
	r.byBits = make(map[flow.Bits]flow.Field, len(r.Fields))
	for name, b := range r.Fields {
		r.byBits[b] = flow.Field{Name: name, Width: b.Width}
	}
	r.byKind = make(map[openflow.Field]flow.MatchKind, len(matchFields))
	for k, f := range matchFields {
		r.byKind[f] = k
	}
}

func regNum(f openflow.Field) (uint8, bool) {
	if f >= openflow.FieldReg0 && f <= openflow.FieldReg0+15 {
		return uint8(f - openflow.FieldReg0), true
	}
	return 0, false
}

// field finds the plugin field at exactly reg[ofs .. ofs+width-1].
func (r *Reverse) field(reg uint8, ofs, width int) (flow.Field, error) {
	f, ok := r.byBits[flow.Bits{Reg: reg, Offset: uint8(ofs), Width: uint8(width)}]
	if !ok {
		return flow.Field{}, fmt.Errorf("%w: plugin %q: reg%d[%d..%d] is no register field of the plugin", sdk.ErrUnallocatedField, r.Owner, reg, ofs, ofs+width-1)
	}
	return f, nil
}

func (r *Reverse) tableName(id uint8) (string, error) {
	if n, ok := r.Table(id); ok {
		return n, nil
	}
	return "", fmt.Errorf("%w: plugin %q: table ID %d is not assigned", sdk.ErrUnknownTable, r.Owner, id)
}

// matchBuilder collects match fields with their bytes in one arena, so a
// read-back match costs a couple of allocations rather than one per field.
type matchBuilder struct {
	fields []flow.MatchField
	arena  []byte
}

func (b *matchBuilder) bytes(v []byte) []byte {
	start := len(b.arena)
	b.arena = append(b.arena, v...)
	return b.arena[start:len(b.arena):len(b.arena)]
}

func (b *matchBuilder) u32(v uint32) []byte {
	var x [4]byte
	binary.BigEndian.PutUint32(x[:], v)
	return b.bytes(x[:])
}

// regMatch splits a register match into the plugin's fields it covers.
func (r *Reverse) regMatch(mb *matchBuilder, reg uint8, v, mask uint32) error {
	left := mask
	for b, f := range r.byBits {
		if b.Reg != reg || b.Mask()&mask == 0 {
			continue
		}
		full := b.Mask() >> b.Offset
		sub := (mask & b.Mask()) >> b.Offset
		val := (v & b.Mask()) >> b.Offset
		mf := flow.MatchField{Kind: flow.MatchRegField, Field: f, Value: mb.u32(val & sub)}
		if sub != full {
			mf.Mask = mb.u32(sub)
		}
		mb.fields = append(mb.fields, mf)
		left &^= b.Mask()
	}
	if left != 0 {
		return fmt.Errorf("%w: plugin %q: match on reg%d bits %#x, which are no register field of the plugin", sdk.ErrUnallocatedField, r.Owner, reg, left)
	}
	return nil
}

// FromMatch translates a switch match into the plugin's terms.
func (r *Reverse) FromMatch(om openflow.Match) (flow.Match, error) {
	r.init()
	mb := &matchBuilder{fields: make([]flow.MatchField, 0, len(om)+2), arena: make([]byte, 0, 16*len(om))}
	for _, of := range om {
		if reg, ok := regNum(of.Field); ok {
			if err := r.regMatch(mb, reg, uint32(of.Uint64()), uint32(of.MaskUint64())); err != nil {
				return flow.Match{}, err
			}
			continue
		}
		k, ok := r.byKind[of.Field]
		if !ok {
			return flow.Match{}, fmt.Errorf("%w: plugin %q: the switch holds a match on %s, which the SDK has no name for", sdk.ErrInvalid, r.Owner, of.Field)
		}
		n := k.Size()
		mf := flow.MatchField{Kind: k, Value: mb.bytes(of.Value[:n])}
		if k == flow.MatchVlanVID {
			// The OpenFlow "tag present" bit is implied by the SDK match.
			mf.Value[0] &^= 0x10
		}
		if of.Masked {
			mf.Mask = mb.bytes(of.Mask[:n])
		}
		mb.fields = append(mb.fields, mf)
	}
	// The canonical order (kind, then field name), so MatchOf takes the
	// slice as it is.
	slices.SortFunc(mb.fields, func(a, b flow.MatchField) int {
		if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return cmp.Compare(a.Field.Name, b.Field.Name)
	})
	return flow.MatchOf(mb.fields...), nil
}

func (r *Reverse) subfield(s openflow.Subfield) (flow.Field, error) {
	reg, ok := regNum(s.Field)
	if !ok {
		return flow.Field{}, fmt.Errorf("%w: plugin %q: %s is not a register", sdk.ErrInvalid, r.Owner, s.Field)
	}
	return r.field(reg, int(s.Ofs), int(s.Bits))
}

// setField turns a set_field back into the SDK's action: a register load,
// or a (masked) header write of the same kind the forward way took.
func (r *Reverse) setField(sf openflow.SetField) (flow.Action, error) {
	of := sf.MatchField
	if reg, ok := regNum(of.Field); ok {
		mask := uint32(of.MaskUint64())
		for b, f := range r.byBits {
			if b.Reg == reg && b.Mask() == mask {
				return flow.LoadField(f, uint32(of.Uint64())>>b.Offset), nil
			}
		}
		return nil, fmt.Errorf("%w: plugin %q: load into reg%d bits %#x, which are no register field of the plugin", sdk.ErrUnallocatedField, r.Owner, reg, mask)
	}
	k, ok := r.byKind[of.Field]
	if !ok {
		return nil, fmt.Errorf("%w: plugin %q: set_field of %s has no SDK form", sdk.ErrInvalid, r.Owner, of.Field)
	}
	n := k.Size()
	a := &flow.ActSetField{Kind: k, Value: slices.Clone(of.Value[:n])}
	if k == flow.MatchVlanVID {
		// The OpenFlow "tag present" bit is implied by the SDK action.
		a.Value[0] &^= 0x10
	}
	if of.Masked {
		a.Mask = slices.Clone(of.Mask[:n])
	}
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("%w: plugin %q: %s has no SDK form: %v", sdk.ErrInvalid, r.Owner, sf, err)
	}
	return a, nil
}

// operand turns a subfield (of move, output or learn) back into a register
// field of the plugin or bits of a header field.
func (r *Reverse) operand(s openflow.Subfield) (flow.Operand, error) {
	if _, ok := regNum(s.Field); ok {
		f, err := r.subfield(s)
		return flow.Reg(f), err
	}
	k, ok := r.byKind[s.Field]
	if !ok {
		return flow.Operand{}, fmt.Errorf("%w: plugin %q: subfield of %s has no SDK form", sdk.ErrInvalid, r.Owner, s.Field)
	}
	bits := s.Bits
	if bits == 0 {
		bits = uint16(k.Size() * 8)
	}
	if s.Ofs == 0 && int(bits) == k.Size()*8 {
		return flow.Header(k), nil
	}
	return flow.HeaderBits(k, uint8(s.Ofs), uint8(bits)), nil
}

// ct turns a ct action back, its exec sets into Mark and Label.
func (r *Reverse) ct(x openflow.CT) (flow.Action, error) {
	if x.Force || x.Alg != 0 || x.ZoneSrc.Field != openflow.FieldNone {
		return nil, fmt.Errorf("%w: plugin %q: %s: force, alg and a zone from a field have no SDK form", sdk.ErrInvalid, r.Owner, x)
	}
	ct := flow.CT{Commit: x.Commit, Zone: x.Zone, NAT: reverseNAT(x.NAT)}
	if x.Recirc {
		name, err := r.tableName(x.Table)
		if err != nil {
			return nil, err
		}
		ct.Resume = flow.GotoTable(name)
	}
	for _, e := range x.Exec {
		sf, ok := e.(openflow.SetField)
		switch {
		case ok && sf.Field == openflow.FieldCTMark:
			ct.Mark, ct.MarkMask = uint32(sf.Uint64()), uint32(sf.MaskUint64())
			continue
		case ok && sf.Field == openflow.FieldCTLabel:
			ct.Label = flow.Uint128From(sf.Value[:16])
			ct.LabelMask = flow.Uint128{Hi: ^uint64(0), Lo: ^uint64(0)}
			if sf.Masked {
				ct.LabelMask = flow.Uint128From(sf.Mask[:16])
			}
			continue
		}
		return nil, fmt.Errorf("%w: plugin %q: ct exec action %s has no SDK form", sdk.ErrInvalid, r.Owner, e)
	}
	return flow.Conntrack(ct), nil
}

// learn turns a learn action back. The learned flows' cookie is the
// learning flow's (the host sets it), so it is not part of the SDK form.
func (r *Reverse) learn(x openflow.Learn) (flow.Action, error) {
	table, err := r.tableName(x.Table)
	if err != nil {
		return nil, err
	}
	l := flow.ActLearn{Table: table, Priority: x.Priority, IdleTimeout: x.IdleTimeout, HardTimeout: x.HardTimeout,
		Specs: make([]flow.LearnSpec, 0, len(x.Specs))}
	if x.FinIdleTimeout != 0 || x.FinHardTimeout != 0 || x.Flags != 0 {
		return nil, fmt.Errorf("%w: plugin %q: %s: fin timeouts and flags have no SDK form", sdk.ErrInvalid, r.Owner, x)
	}
	for i, sp := range x.Specs {
		dst, err := r.operand(sp.Dst)
		if err != nil {
			return nil, fmt.Errorf("learn spec %d: %w", i, err)
		}
		ls := flow.LearnSpec{Kind: flow.LearnMatch, Dst: dst, Value: sp.Imm}
		if sp.Kind == openflow.LearnLoad {
			ls.Kind = flow.LearnLoad
		} else if sp.Kind != openflow.LearnMatch {
			return nil, fmt.Errorf("%w: plugin %q: learn spec %d (%d) has no SDK form", sdk.ErrInvalid, r.Owner, i, sp.Kind)
		}
		if sp.Src.Field != openflow.FieldNone {
			if ls.Src, err = r.operand(sp.Src); err != nil {
				return nil, fmt.Errorf("learn spec %d: %w", i, err)
			}
		}
		l.Specs = append(l.Specs, ls)
	}
	return flow.Learn(l), nil
}

// controller turns a controller action back; its meter must be the
// plugin's.
func (r *Reverse) controller(x openflow.Controller) (flow.Action, error) {
	// The codec leaves max_len out when it is the whole packet, and
	// reads an absent one back as 0.
	if x.ID != 0 || x.Pause {
		return nil, fmt.Errorf("%w: plugin %q: %s: a controller ID or pause has no SDK form", sdk.ErrInvalid, r.Owner, x)
	}
	maxLen := x.MaxLen
	if maxLen == 0 {
		maxLen = 0xffff
	}
	if x.MeterID == 0 && x.Reason == openflow.ReasonAction {
		return flow.Controller(maxLen, x.Userdata), nil
	}
	reason := slices.Index(reasons[:], x.Reason)
	if reason < 0 {
		return nil, fmt.Errorf("%w: plugin %q: %s: packet-in reason %d has no SDK form", sdk.ErrInvalid, r.Owner, x, x.Reason)
	}
	var meter uint32
	if x.MeterID != 0 {
		var err error
		if meter, err = r.meter(x.MeterID); err != nil {
			return nil, err
		}
	}
	return flow.ControllerMetered(maxLen, x.Userdata, flow.ControllerReason(reason), meter), nil
}

func (r *Reverse) meter(id uint32) (uint32, error) {
	if id>>10 != uint32(r.Prefix) {
		return 0, fmt.Errorf("%w: plugin %q: meter %d is not in the plugin's share", sdk.ErrNotOwner, r.Owner, id)
	}
	return id & 0x3ff, nil
}

// FromActions translates a switch action list into the plugin's terms.
func (r *Reverse) FromActions(as []openflow.Action) ([]flow.Action, error) {
	r.init()
	out := make([]flow.Action, 0, len(as))
	for _, oa := range as {
		var a flow.Action
		var err error
		switch x := oa.(type) {
		case openflow.Output:
			switch x.Port {
			case openflow.PortInPort:
				a = flow.OutputInPort()
			case openflow.PortNormal:
				a = flow.Normal()
			default:
				a = flow.Output(x.Port)
			}
		case openflow.OutputReg:
			var f flow.Field
			if f, err = r.subfield(x.Src); err == nil {
				a = flow.OutputField(f)
			}
		case openflow.Conjunction:
			a = flow.Conjunction(x.ID, x.Clause, x.NClauses)
		case openflow.Controller:
			a, err = r.controller(x)
		case openflow.SetField:
			a, err = r.setField(x)
		case openflow.Move:
			var src, dst flow.Operand
			if src, err = r.operand(x.Src); err == nil {
				if dst, err = r.operand(x.Dst); err == nil {
					a = flow.Move(src, dst)
				}
			}
		case openflow.CT:
			a, err = r.ct(x)
		case openflow.CTClear:
			a = flow.CTClear()
		case openflow.Resubmit:
			if x.Port != openflow.PortInPort {
				return nil, fmt.Errorf("%w: plugin %q: %s: resubmit to a port has no SDK form", sdk.ErrInvalid, r.Owner, x)
			}
			var name string
			if name, err = r.tableName(x.Table); err == nil {
				a = flow.Resubmit(flow.GotoTable(name))
			}
		case openflow.Note:
			// The switch pads a note with zero bytes; the SDK text pads
			// it again, so trailing zeros are dropped.
			a = flow.Note(bytes.TrimRight(x.Data, "\x00"))
		case openflow.Learn:
			a, err = r.learn(x)
		case openflow.Group:
			if x.ID>>24 != uint32(r.Prefix) {
				return nil, fmt.Errorf("%w: plugin %q: group %d is not in the plugin's share", sdk.ErrNotOwner, r.Owner, x.ID)
			}
			a = flow.ApplyGroup(x.ID & 0xffffff)
		case openflow.Meter:
			var id uint32
			if id, err = r.meter(x.ID); err == nil {
				a = flow.ApplyMeter(id)
			}
		case openflow.DecTTL:
			a = flow.DecTTL()
		case openflow.PushVLAN:
			a = flow.PushVLAN(x.EtherType)
		case openflow.PopVLAN:
			a = flow.PopVLAN()
		default:
			err = fmt.Errorf("%w: plugin %q: action %s has no SDK form", sdk.ErrInvalid, r.Owner, oa)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// FromFlow translates one switch flow of the plugin. The Tag is the low
// 32 bits of the cookie; jumps come back as GotoTable of the resolved
// table, whichever way the plugin wrote them.
func (r *Reverse) FromFlow(of *openflow.Flow) (*flow.Flow, error) {
	r.init()
	table, err := r.tableName(of.Table)
	if err != nil {
		return nil, err
	}
	_, _, tag := pipeline.SplitCookie(of.Cookie)
	f := &flow.Flow{Table: table, Priority: of.Priority, Tag: tag, IdleTimeout: of.IdleTimeout, HardTimeout: of.HardTimeout}
	if f.Match, err = r.FromMatch(of.Match); err != nil {
		return nil, fmt.Errorf("flow in table %q: %w", table, err)
	}
	for _, in := range of.Instructions {
		switch x := in.(type) {
		case openflow.ApplyActions:
			if f.Actions, err = r.FromActions(x.Actions); err != nil {
				return nil, fmt.Errorf("flow in table %q: %w", table, err)
			}
		case openflow.GotoTable:
			name, err := r.tableName(x.Table)
			if err != nil {
				return nil, err
			}
			f.Goto = flow.GotoTable(name)
		default:
			return nil, fmt.Errorf("%w: plugin %q: flow in table %q: instruction %T has no SDK form", sdk.ErrInvalid, r.Owner, table, in)
		}
	}
	return f, nil
}

// reverseNAT is the inverse of nat.
func reverseNAT(n *openflow.NAT) *flow.NAT {
	if n == nil {
		return nil
	}
	out := &flow.NAT{MinAddr: n.MinAddr, MaxAddr: n.MaxAddr, MinPort: n.MinPort, MaxPort: n.MaxPort,
		Persistent: n.Flags&openflow.NATPersistent != 0}
	switch {
	case n.Flags&openflow.NATSrc != 0:
		out.Kind = flow.NATSrc
	case n.Flags&openflow.NATDst != 0:
		out.Kind = flow.NATDst
	}
	switch {
	case n.Flags&openflow.NATProtoHash != 0:
		out.Selection = flow.NATHash
	case n.Flags&openflow.NATRandom != 0:
		out.Selection = flow.NATRandom
	}
	return out
}

var reverseGroupTypes = map[openflow.GroupType]flow.GroupType{
	openflow.GroupTypeAll: flow.GroupAll, openflow.GroupTypeSelect: flow.GroupSelect,
	openflow.GroupTypeIndirect: flow.GroupIndirect, openflow.GroupTypeFastFailover: flow.GroupFastFailover,
}

// FromGroup translates a group of the plugin as the switch describes it
// (group desc reply): its local ID, type, selection method and buckets.
// Bucket IDs, which the switch assigns, are not part of the SDK form.
func (r *Reverse) FromGroup(g *openflow.GroupDesc) (*flow.Group, error) {
	r.init()
	if g.GroupID>>24 != uint32(r.Prefix) {
		return nil, fmt.Errorf("%w: plugin %q: group %d is not in the plugin's share", sdk.ErrNotOwner, r.Owner, g.GroupID)
	}
	t, ok := reverseGroupTypes[g.Type]
	if !ok {
		return nil, fmt.Errorf("%w: plugin %q: group %d: type %d has no SDK form", sdk.ErrInvalid, r.Owner, g.GroupID, g.Type)
	}
	out := &flow.Group{ID: g.GroupID & 0xffffff, Type: t}
	if s := g.Selection; s != nil {
		sel := &flow.Selection{}
		switch s.Method {
		case flow.SelectHash.String():
			sel.Method = flow.SelectHash
		case flow.SelectDPHash.String():
			sel.Method = flow.SelectDPHash
		default:
			return nil, fmt.Errorf("%w: plugin %q: group %d: selection method %q has no SDK form", sdk.ErrInvalid, r.Owner, g.GroupID, s.Method)
		}
		if s.Param != 0 {
			return nil, fmt.Errorf("%w: plugin %q: group %d: selection_method_param has no SDK form", sdk.ErrInvalid, r.Owner, g.GroupID)
		}
		for _, f := range s.Fields {
			k, ok := r.byKind[f]
			if !ok {
				return nil, fmt.Errorf("%w: plugin %q: group %d: hash on %s has no SDK form", sdk.ErrInvalid, r.Owner, g.GroupID, f)
			}
			sel.Fields = append(sel.Fields, k)
		}
		out.Selection = sel
	}
	for i, b := range g.Buckets {
		acts, err := r.FromActions(b.Actions)
		if err != nil {
			return nil, fmt.Errorf("group %d bucket %d: %w", out.ID, i, err)
		}
		out.Buckets = append(out.Buckets, flow.Bucket{Weight: b.Weight, WatchPort: b.WatchPort, Actions: acts})
	}
	return out, nil
}
