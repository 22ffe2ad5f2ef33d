package ofxlate

import (
	"fmt"

	"switchyard.dev/switchyard/host/flowstore"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

var matchFields = map[flow.MatchKind]openflow.Field{
	flow.MatchInPort:   openflow.FieldInPort,
	flow.MatchEthSrc:   openflow.FieldEthSrc,
	flow.MatchEthDst:   openflow.FieldEthDst,
	flow.MatchEthType:  openflow.FieldEthType,
	flow.MatchVlanVID:  openflow.FieldVLANVID,
	flow.MatchIPProto:  openflow.FieldIPProto,
	flow.MatchIPv4Src:  openflow.FieldIPv4Src,
	flow.MatchIPv4Dst:  openflow.FieldIPv4Dst,
	flow.MatchIPv6Src:  openflow.FieldIPv6Src,
	flow.MatchIPv6Dst:  openflow.FieldIPv6Dst,
	flow.MatchTCPSrc:   openflow.FieldTCPSrc,
	flow.MatchTCPDst:   openflow.FieldTCPDst,
	flow.MatchUDPSrc:   openflow.FieldUDPSrc,
	flow.MatchUDPDst:   openflow.FieldUDPDst,
	flow.MatchICMPType: openflow.FieldICMPv4Type,
	flow.MatchICMPCode: openflow.FieldICMPv4Code,
	flow.MatchARPOp:    openflow.FieldARPOp,
	flow.MatchARPSpa:   openflow.FieldARPSPA,
	flow.MatchARPTpa:   openflow.FieldARPTPA,
	flow.MatchARPSha:   openflow.FieldARPSHA,
	flow.MatchARPTha:   openflow.FieldARPTHA,
	flow.MatchCTState:  openflow.FieldCTState,
	flow.MatchCTZone:   openflow.FieldCTZone,
	flow.MatchCTMark:   openflow.FieldCTMark,
	flow.MatchTunID:    openflow.FieldTunID,
	flow.MatchTunDst:   openflow.FieldTunIPv4Dst,
	flow.MatchMetadata: openflow.FieldMetadata,
	flow.MatchConjID:   openflow.FieldConjID,
	// flow vocabulary (issue 9)
	flow.MatchSCTPSrc:    openflow.FieldSCTPSrc,
	flow.MatchSCTPDst:    openflow.FieldSCTPDst,
	flow.MatchTCPFlags:   openflow.FieldTCPFlags,
	flow.MatchICMPv6Type: openflow.FieldICMPv6Type,
	flow.MatchICMPv6Code: openflow.FieldICMPv6Code,
	flow.MatchNDTarget:   openflow.FieldNDTarget,
	flow.MatchNDSLL:      openflow.FieldNDSLL,
	flow.MatchNDTLL:      openflow.FieldNDTLL,
	flow.MatchCTLabel:    openflow.FieldCTLabel,
	flow.MatchCTNwSrc:    openflow.FieldCTNwSrc,
	flow.MatchCTNwDst:    openflow.FieldCTNwDst,
	flow.MatchCTIPv6Src:  openflow.FieldCTIPv6Src,
	flow.MatchCTIPv6Dst:  openflow.FieldCTIPv6Dst,
	flow.MatchCTTpSrc:    openflow.FieldCTTpSrc,
	flow.MatchCTTpDst:    openflow.FieldCTTpDst,
	flow.MatchCTNwProto:  openflow.FieldCTNwProto,
	flow.MatchPktMark:    openflow.FieldPktMark,
	flow.MatchTunSrc:     openflow.FieldTunIPv4Src,
	flow.MatchTunIPv6Src: openflow.FieldTunIPv6Src,
	flow.MatchTunIPv6Dst: openflow.FieldTunIPv6Dst,
	flow.MatchIPDSCP:     openflow.FieldIPDSCP,
	flow.MatchIPECN:      openflow.FieldIPECN,
}

func reg(b flow.Bits) openflow.Field { return openflow.FieldReg0 + openflow.Field(b.Reg) }

func matchField(m flow.MatchField, fields map[string]flow.Bits) (openflow.MatchField, error) {
	switch m.Kind {
	case flow.MatchRegField:
		b, ok := fields[m.Field.Name]
		if !ok {
			return openflow.MatchField{}, fmt.Errorf("%w: register field %q is not resolved", sdk.ErrUnallocatedField, m.Field.Name)
		}
		return openflow.Masked(reg(b), m.Uint()<<b.Offset, (m.MaskUint()<<b.Offset)&uint64(b.Mask())), nil
	case flow.MatchVlanVID:
		// OpenFlow marks "a VLAN tag is present" with the 0x1000 bit.
		return openflow.VLANID(uint16(m.Uint())), nil
	}
	f, ok := matchFields[m.Kind]
	if !ok {
		return openflow.MatchField{}, fmt.Errorf("%w: match on %s is not supported by the switch codec", sdk.ErrInvalid, m.Kind)
	}
	return openflow.Bytes(f, m.Value, m.Mask), nil
}

// Match translates a match. Register fields that share a register merge
// into one masked match on it (OpenFlow allows a field once).
func Match(m flow.Match, fields map[string]flow.Bits) (openflow.Match, error) {
	out := make(openflow.Match, 0, m.Len())
	for _, f := range m.Fields() {
		of, err := matchField(f, fields)
		if err != nil {
			return nil, err
		}
		if f.Kind == flow.MatchRegField && mergeReg(out, &of) {
			continue
		}
		out = append(out, of)
	}
	return out, nil
}

// mergeReg folds of into a match on the same register already in out.
func mergeReg(out openflow.Match, of *openflow.MatchField) bool {
	for i := range out {
		if out[i].Field == of.Field {
			prev := &out[i]
			v := prev.Uint64()&prev.MaskUint64() | of.Uint64()&of.MaskUint64()
			out[i] = openflow.Masked(of.Field, v, prev.MaskUint64()|of.MaskUint64())
			return true
		}
	}
	return false
}

// Context is what translating actions needs beyond the actions themselves.
type Context struct {
	Fields map[string]flow.Bits
	Prefix uint16
	// Cookie is given to flows that learn actions add
	// (pipeline.LearnedCookie).
	Cookie uint64
	// Jumps are the resolved targets of the actions that carry a jump
	// (flow.JumpOf), in order (pipeline.Resolved.Jumps).
	Jumps []uint8
	// Table resolves the jumps of actions outside a flow (group buckets,
	// packet-outs), where Jumps is empty; nil refuses them.
	Table func(flow.Jump) (uint8, error)
}

func (c *Context) bits(f flow.Field) (flow.Bits, error) {
	b, ok := c.Fields[f.Name]
	if !ok {
		return flow.Bits{}, fmt.Errorf("%w: register field %q is not resolved", sdk.ErrUnallocatedField, f.Name)
	}
	return b, nil
}

func (c *Context) operand(o flow.Operand) (openflow.Subfield, error) {
	if f, ok := o.Reg(); ok {
		b, err := c.bits(f)
		if err != nil {
			return openflow.Subfield{}, err
		}
		return openflow.Bits(reg(b), int(b.Offset), int(b.Width)), nil
	}
	k, ofs, w, ok := o.Header()
	if !ok {
		return openflow.Subfield{}, fmt.Errorf("%w: empty move/learn operand", sdk.ErrInvalid)
	}
	f, ok := matchFields[k]
	if !ok {
		return openflow.Subfield{}, fmt.Errorf("%w: header field %s cannot be an operand", sdk.ErrInvalid, k)
	}
	return openflow.Bits(f, int(ofs), int(w)), nil
}

// jumps hands out the resolved jump targets in action order.
type jumps struct {
	c *Context
	n int
}

func (j *jumps) next(target flow.Jump) (uint8, error) {
	if j.n < len(j.c.Jumps) {
		id := j.c.Jumps[j.n]
		j.n++
		return id, nil
	}
	if j.c.Table == nil {
		return 0, fmt.Errorf("%w: jump %s is not resolved", sdk.ErrInvalid, target)
	}
	return j.c.Table(target)
}

var reasons = [...]openflow.PacketInReason{
	flow.ReasonAction: openflow.ReasonAction, flow.ReasonNoMatch: openflow.ReasonNoMatch, flow.ReasonInvalidTTL: openflow.ReasonInvalidTTL,
}

func nat(n *flow.NAT) *openflow.NAT {
	out := &openflow.NAT{MinAddr: n.MinAddr, MaxAddr: n.MaxAddr, MinPort: n.MinPort, MaxPort: n.MaxPort}
	switch n.Kind {
	case flow.NATSrc:
		out.Flags |= openflow.NATSrc
	case flow.NATDst:
		out.Flags |= openflow.NATDst
	}
	if n.Persistent {
		out.Flags |= openflow.NATPersistent
	}
	switch n.Selection {
	case flow.NATHash:
		out.Flags |= openflow.NATProtoHash
	case flow.NATRandom:
		out.Flags |= openflow.NATRandom
	}
	return out
}

func setField(a *flow.ActSetField) (openflow.Action, error) {
	if a.Kind == flow.MatchVlanVID {
		return openflow.Set(openflow.VLANID(uint16(flow.MatchField{Value: a.Value}.Uint()))), nil
	}
	f, ok := matchFields[a.Kind]
	if !ok {
		return nil, fmt.Errorf("%w: set_field of %s is not supported by the switch codec", sdk.ErrInvalid, a.Kind)
	}
	return openflow.Set(openflow.Bytes(f, a.Value, a.Mask)), nil
}

func (c *Context) learn(a *flow.ActLearn, table uint8) (openflow.Action, error) {
	out := openflow.Learn{Table: table, Priority: a.Priority, IdleTimeout: a.IdleTimeout, HardTimeout: a.HardTimeout, Cookie: c.Cookie}
	for i, sp := range a.Specs {
		dst, err := c.operand(sp.Dst)
		if err != nil {
			return nil, fmt.Errorf("learn spec %d: %w", i, err)
		}
		ls := openflow.LearnSpec{Kind: openflow.LearnMatch, Dst: dst, Imm: sp.Value}
		if sp.Kind == flow.LearnLoad {
			ls.Kind = openflow.LearnLoad
		}
		if sp.Src != (flow.Operand{}) {
			if ls.Src, err = c.operand(sp.Src); err != nil {
				return nil, fmt.Errorf("learn spec %d: %w", i, err)
			}
		}
		out.Specs = append(out.Specs, ls)
	}
	return out, nil
}

func ct(a *flow.ActCT, js *jumps) (openflow.Action, error) {
	x := openflow.CT{Commit: a.Commit, Zone: a.Zone}
	if a.Resume.Kind != flow.JumpNone {
		id, err := js.next(a.Resume)
		if err != nil {
			return nil, err
		}
		x.Recirc, x.Table = true, id
	}
	if a.NAT != nil {
		x.NAT = nat(a.NAT)
	}
	if a.MarkMask == 0xffffffff {
		x.Exec = append(x.Exec, openflow.Set(openflow.Exact(openflow.FieldCTMark, uint64(a.Mark))))
	} else if a.MarkMask != 0 {
		x.Exec = append(x.Exec, openflow.Set(openflow.Masked(openflow.FieldCTMark, uint64(a.Mark), uint64(a.MarkMask))))
	}
	if full := (flow.Uint128{Hi: ^uint64(0), Lo: ^uint64(0)}); a.LabelMask == full {
		x.Exec = append(x.Exec, openflow.Set(openflow.Bytes(openflow.FieldCTLabel, a.Label.Bytes(), nil)))
	} else if !a.LabelMask.IsZero() {
		x.Exec = append(x.Exec, openflow.Set(openflow.Uint128(openflow.FieldCTLabel, a.Label.Hi, a.Label.Lo, a.LabelMask.Hi, a.LabelMask.Lo)))
	}
	return x, nil
}

// Action translates one action; js hands out its resolved jump.
func (c *Context) action(a flow.Action, js *jumps) (openflow.Action, error) {
	switch a := a.(type) {
	case *flow.ActOutput:
		return openflow.Output{Port: a.Port}, nil
	case *flow.ActInPort:
		return openflow.Output{Port: openflow.PortInPort}, nil
	case *flow.ActNormal:
		return openflow.Output{Port: openflow.PortNormal}, nil
	case *flow.ActOutputField:
		b, err := c.bits(a.Field)
		if err != nil {
			return nil, err
		}
		return openflow.OutputReg{Src: openflow.Bits(reg(b), int(b.Offset), int(b.Width))}, nil
	case *flow.ActConjunction:
		return openflow.Conjunction{ID: a.ID, Clause: a.Clause, NClauses: a.NClauses}, nil
	case *flow.ActController:
		x := openflow.Controller{MaxLen: a.MaxLen, Userdata: a.Userdata, Reason: openflow.ReasonAction}
		if int(a.Reason) < len(reasons) {
			x.Reason = reasons[a.Reason]
		}
		if a.Meter != 0 {
			x.MeterID = pipeline.MeterID(c.Prefix, a.Meter)
		}
		return x, nil
	case *flow.ActSetField:
		return setField(a)
	case *flow.ActLoad:
		b, err := c.bits(a.Field)
		if err != nil {
			return nil, err
		}
		return openflow.Load(reg(b), int(b.Offset), int(b.Width), uint64(a.Value)), nil
	case *flow.ActMove:
		src, err := c.operand(a.From)
		if err != nil {
			return nil, err
		}
		dst, err := c.operand(a.To)
		if err != nil {
			return nil, err
		}
		return openflow.Move{Src: src, Dst: dst}, nil
	case *flow.ActCT:
		return ct(a, js)
	case *flow.ActCTClear:
		return openflow.CTClear{}, nil
	case *flow.ActGroup:
		return openflow.Group{ID: pipeline.GroupID(c.Prefix, a.ID)}, nil
	case *flow.ActMeter:
		return openflow.Meter{ID: pipeline.MeterID(c.Prefix, a.ID)}, nil
	case *flow.ActDecTTL:
		return openflow.DecTTL{}, nil
	case *flow.ActPushVLAN:
		return openflow.PushVLAN{EtherType: a.TPID}, nil
	case *flow.ActPopVLAN:
		return openflow.PopVLAN{}, nil
	case *flow.ActResubmit:
		id, err := js.next(a.To)
		if err != nil {
			return nil, err
		}
		return openflow.ResubmitTable(id), nil
	case *flow.ActNote:
		return openflow.Note{Data: a.Data}, nil
	case *flow.ActLearn:
		id, err := js.next(flow.GotoTable(a.Table))
		if err != nil {
			return nil, err
		}
		return c.learn(a, id)
	case nil:
		return nil, fmt.Errorf("%w: missing action, or one of a kind this host does not know", sdk.ErrInvalid)
	}
	return nil, fmt.Errorf("%w: action %s is not supported by this host", sdk.ErrInvalid, a)
}

// Actions translates an action list.
func Actions(as []flow.Action, c *Context) ([]openflow.Action, error) {
	out := make([]openflow.Action, 0, len(as))
	js := jumps{c: c}
	for _, a := range as {
		oa, err := c.action(a, &js)
		if err != nil {
			return nil, err
		}
		out = append(out, oa)
	}
	return out, nil
}

// Flow translates a resolved flow.
func Flow(r *pipeline.Resolved) (openflow.Flow, error) {
	m, err := Match(r.Flow.Match, r.Fields)
	if err != nil {
		return openflow.Flow{}, fmt.Errorf("plugin %q: flow %s: %w", r.Owner, r.Flow, err)
	}
	acts, err := Actions(r.Flow.Actions, &Context{Fields: r.Fields, Prefix: r.Prefix, Cookie: pipeline.LearnedCookie(r.Cookie), Jumps: r.Jumps})
	if err != nil {
		return openflow.Flow{}, fmt.Errorf("plugin %q: flow %s: %w", r.Owner, r.Flow, err)
	}
	f := openflow.Flow{Table: r.TableID, Priority: r.Flow.Priority, Cookie: r.Cookie, IdleTimeout: r.Flow.IdleTimeout, HardTimeout: r.Flow.HardTimeout, Match: m}
	if f.IdleTimeout != 0 || f.HardTimeout != 0 {
		// The switch tells the host when it times the flow out, so the
		// flow store (and the owner, if it asked) learn that it is gone.
		f.Flags |= openflow.FlagSendFlowRem
	}
	if len(acts) > 0 {
		f.Instructions = append(f.Instructions, openflow.Apply(acts...))
	}
	if r.Goto != pipeline.TableNone {
		f.Instructions = append(f.Instructions, openflow.Goto(r.Goto))
	}
	return f, nil
}

// FlowMod builds the flow mod for one change. Adds and modifies both use
// OFPFC_ADD: it replaces an existing flow with the same key, including its
// cookie, which is what a resync after a restart needs.
func FlowMod(kind flow.OpKind, r *pipeline.Resolved) (*openflow.FlowMod, error) {
	f, err := Flow(r)
	if err != nil {
		return nil, err
	}
	if kind == flow.OpDelete {
		f.Instructions = nil
		return &openflow.FlowMod{Command: openflow.FlowDeleteStrict, Flow: f}, nil
	}
	return &openflow.FlowMod{Command: openflow.FlowAdd, Flow: f}, nil
}

var groupTypes = map[flow.GroupType]openflow.GroupType{
	flow.GroupAll: openflow.GroupTypeAll, flow.GroupSelect: openflow.GroupTypeSelect,
	flow.GroupIndirect: openflow.GroupTypeIndirect, flow.GroupFastFailover: openflow.GroupTypeFastFailover,
}

// GroupMod builds the group mod for one change. c resolves the register
// fields and resubmit tables buckets use (the owner's).
func GroupMod(kind flow.OpKind, g *flowstore.GroupEntry, c *Context) (*openflow.GroupMod, error) {
	m := &openflow.GroupMod{GroupID: g.Global, Type: groupTypes[g.Group.Type]}
	if sel := g.Group.Selection; sel != nil && kind != flow.OpDelete {
		m.Selection = &openflow.GroupSelection{Method: sel.Method.String()}
		for _, k := range sel.Fields {
			f, ok := matchFields[k]
			if !ok {
				return nil, fmt.Errorf("%w: plugin %q: group %d: cannot hash on %s", sdk.ErrInvalid, g.Owner, g.Group.ID, k)
			}
			m.Selection.Fields = append(m.Selection.Fields, f)
		}
	}
	switch kind {
	case flow.OpDelete:
		m.Command = openflow.GroupDelete
		return m, nil
	case flow.OpModify:
		m.Command = openflow.GroupModify
	default:
		m.Command = openflow.GroupAdd
	}
	for _, bk := range g.Group.Buckets {
		acts, err := Actions(bk.Actions, &Context{Fields: c.Fields, Prefix: g.Prefix, Table: c.Table,
			Cookie: pipeline.Cookie(g.Prefix, pipeline.LearnedRound, 0)})
		if err != nil {
			return nil, fmt.Errorf("plugin %q: group %d: %w", g.Owner, g.Group.ID, err)
		}
		m.Buckets = append(m.Buckets, openflow.Bucket{Weight: bk.Weight, WatchPort: bk.WatchPort, Actions: acts})
	}
	return m, nil
}

// MeterMod builds the meter mod for one change.
func MeterMod(kind flow.OpKind, e *flowstore.MeterEntry) *openflow.MeterMod {
	m := &openflow.MeterMod{MeterID: e.Global}
	switch kind {
	case flow.OpDelete:
		m.Command = openflow.MeterDelete
		return m
	case flow.OpModify:
		m.Command = openflow.MeterModify
	default:
		m.Command = openflow.MeterAdd
	}
	m.Flags = openflow.MeterKbps
	if e.Meter.Unit == flow.MeterPktps {
		m.Flags = openflow.MeterPktps
	}
	for _, b := range e.Meter.Bands {
		if b.Burst != 0 {
			m.Flags |= openflow.MeterBurst
		}
		m.Bands = append(m.Bands, openflow.MeterBand{Type: 1, Rate: b.Rate, BurstSize: b.Burst})
	}
	return m
}
