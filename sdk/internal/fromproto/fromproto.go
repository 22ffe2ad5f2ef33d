// Package fromproto converts wire messages into SDK types. Every function is
// pure and the inverse of its namesake in toproto. Messages come from another
// process, so malformed values (bad addresses, out-of-range enums) are
// reported as errors rather than trusted.
package fromproto

import (
	"net/netip"

	"switchyard.dev/switchyard/sdk/flow"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

func Field(f *pb.Field) flow.Field {
	if f == nil {
		return flow.Field{}
	}
	return flow.Field{Name: f.GetName(), Width: uint8(min(f.GetWidth(), 255))}
}

func Bits(b *pb.Bits) flow.Bits {
	return flow.Bits{Reg: uint8(b.GetReg()), Offset: uint8(b.GetOffset()), Width: uint8(b.GetWidth())}
}

func MatchField(m *pb.MatchField) flow.MatchField {
	out := flow.MatchField{Kind: flow.MatchKind(min(m.GetKind(), 255)), Value: m.GetValue(), Mask: m.GetMask()}
	if len(out.Mask) == 0 {
		out.Mask = nil
	}
	if out.Kind == flow.MatchRegField {
		out.Field = Field(m.GetField())
	}
	return out
}

func Jump(j *pb.Jump) flow.Jump {
	if j == nil {
		return flow.Jump{}
	}
	return flow.Jump{Kind: flow.JumpKind(min(j.GetKind(), 255)), Stage: flow.Stage(min(j.GetStage(), 255)), Pipeline: flow.Pipeline(min(j.GetPipeline(), 255)), Table: j.GetTable()}
}

// Operand converts a move/learn operand; nil is the zero Operand.
func Operand(o *pb.Operand) flow.Operand {
	switch {
	case o == nil:
		return flow.Operand{}
	case o.GetField() != nil:
		return flow.Reg(Field(o.GetField()))
	case o.GetHeader() != 0:
		return flow.HeaderBits(flow.MatchKind(min(o.GetHeader(), 255)), uint8(min(o.GetOffset(), 255)), uint8(min(o.GetWidth(), 255)))
	}
	return flow.Operand{}
}

// addr reads 4 or 16 address bytes; anything else is no address (which
// NAT validation then reports where an address is needed).
func addr(b []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(b)
	return a
}

func NAT(n *pb.NAT) *flow.NAT {
	if n == nil {
		return nil
	}
	return &flow.NAT{Kind: flow.NATKind(min(n.GetKind(), 255)), MinAddr: addr(n.GetMinAddr()), MaxAddr: addr(n.GetMaxAddr()),
		MinPort: uint16(min(n.GetMinPort(), 0xffff)), MaxPort: uint16(min(n.GetMaxPort(), 0xffff)),
		Persistent: n.GetPersistent(), Selection: flow.NATSelection(min(n.GetSelection(), 255))}
}

func CT(c *pb.CT) *flow.ActCT {
	out := &flow.ActCT{Commit: c.GetCommit(), Zone: uint16(min(c.GetZone(), 0xffff)), Resume: Jump(c.GetResume()),
		Mark: c.GetMark(), MarkMask: c.GetMarkMask(), NAT: NAT(c.GetNat())}
	if len(c.GetLabelMask()) > 0 {
		out.Label, out.LabelMask = flow.Uint128From(c.GetLabel()), flow.Uint128From(c.GetLabelMask())
	}
	return out
}

func Learn(l *pb.Learn) *flow.ActLearn {
	out := &flow.ActLearn{Table: l.GetTable(), Priority: uint16(min(l.GetPriority(), 0xffff)),
		IdleTimeout: uint16(min(l.GetIdleTimeout(), 0xffff)), HardTimeout: uint16(min(l.GetHardTimeout(), 0xffff))}
	for _, sp := range l.GetSpecs() {
		out.Specs = append(out.Specs, flow.LearnSpec{Kind: flow.LearnKind(min(sp.GetKind(), 255)), Dst: Operand(sp.GetDst()), Src: Operand(sp.GetSrc()), Value: sp.GetValue()})
	}
	return out
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// Action converts one action. An unknown kind yields nil, which
// Flow.Validate and Group.Validate report.
func Action(a *pb.Action) flow.Action {
	switch pb.ActionKind(a.GetKind()) {
	case pb.ActionKind_ACTION_OUTPUT:
		return &flow.ActOutput{Port: a.GetPort()}
	case pb.ActionKind_ACTION_OUTPUT_FIELD:
		return &flow.ActOutputField{Field: Field(a.GetField())}
	case pb.ActionKind_ACTION_IN_PORT:
		return &flow.ActInPort{}
	case pb.ActionKind_ACTION_NORMAL:
		return &flow.ActNormal{}
	case pb.ActionKind_ACTION_CONTROLLER:
		return &flow.ActController{MaxLen: uint16(min(a.GetMaxLen(), 0xffff)), Userdata: nilIfEmpty(a.GetUserdata()),
			Reason: flow.ControllerReason(min(a.GetReason(), 255)), Meter: uint32(min(a.GetUint(), 0xffffffff))}
	case pb.ActionKind_ACTION_SET_FIELD:
		return &flow.ActSetField{Kind: flow.MatchKind(min(a.GetSetKind(), 255)), Value: nilIfEmpty(a.GetValue()), Mask: nilIfEmpty(a.GetMask())}
	case pb.ActionKind_ACTION_LOAD:
		return &flow.ActLoad{Field: Field(a.GetField()), Value: uint32(min(a.GetUint(), 0xffffffff))}
	case pb.ActionKind_ACTION_MOVE:
		return &flow.ActMove{From: Operand(a.GetMoveFrom()), To: Operand(a.GetMoveTo())}
	case pb.ActionKind_ACTION_CT:
		return CT(a.GetCt())
	case pb.ActionKind_ACTION_CT_CLEAR:
		return &flow.ActCTClear{}
	case pb.ActionKind_ACTION_GROUP:
		return &flow.ActGroup{ID: uint32(min(a.GetUint(), 0xffffffff))}
	case pb.ActionKind_ACTION_METER:
		return &flow.ActMeter{ID: uint32(min(a.GetUint(), 0xffffffff))}
	case pb.ActionKind_ACTION_DEC_TTL:
		return &flow.ActDecTTL{}
	case pb.ActionKind_ACTION_PUSH_VLAN:
		return &flow.ActPushVLAN{TPID: uint16(min(a.GetUint(), 0xffff))}
	case pb.ActionKind_ACTION_POP_VLAN:
		return &flow.ActPopVLAN{}
	case pb.ActionKind_ACTION_CONJUNCTION:
		return &flow.ActConjunction{ID: uint32(min(a.GetUint(), 0xffffffff)), Clause: uint8(a.GetPort() >> 8), NClauses: uint8(a.GetPort())}
	case pb.ActionKind_ACTION_RESUBMIT:
		return &flow.ActResubmit{To: Jump(a.GetJump())}
	case pb.ActionKind_ACTION_NOTE:
		return &flow.ActNote{Data: nilIfEmpty(a.GetValue())}
	case pb.ActionKind_ACTION_LEARN:
		return Learn(a.GetLearn())
	}
	return nil
}

func Actions(as []*pb.Action) []flow.Action {
	if len(as) == 0 {
		return nil
	}
	out := make([]flow.Action, len(as))
	for i, a := range as {
		out[i] = Action(a)
	}
	return out
}

func flowInto(out *flow.Flow, f *pb.Flow, fields []flow.MatchField) {
	for i, m := range f.GetMatch() {
		fields[i] = MatchField(m)
	}
	*out = flow.Flow{
		Table: f.GetTable(), Priority: uint16(min(f.GetPriority(), 0xffff)), Match: flow.MatchOf(fields...),
		Actions: Actions(f.GetActions()), Goto: Jump(f.GetGoto()), Tag: f.GetTag(),
		IdleTimeout: uint16(min(f.GetIdleTimeout(), 0xffff)), HardTimeout: uint16(min(f.GetHardTimeout(), 0xffff)),
	}
}

// Flow converts one flow.
func Flow(f *pb.Flow) *flow.Flow {
	out := &flow.Flow{}
	flowInto(out, f, make([]flow.MatchField, len(f.GetMatch())))
	return out
}

func Group(g *pb.Group) *flow.Group {
	out := &flow.Group{ID: g.GetId(), Type: flow.GroupType(min(g.GetType(), 255))}
	if sel := g.GetSelection(); sel != nil {
		out.Selection = &flow.Selection{Method: flow.SelectionMethod(min(sel.GetMethod(), 255))}
		for _, k := range sel.GetFields() {
			out.Selection.Fields = append(out.Selection.Fields, flow.MatchKind(min(k, 255)))
		}
	}
	for _, b := range g.GetBuckets() {
		out.Buckets = append(out.Buckets, flow.Bucket{Weight: uint16(min(b.GetWeight(), 0xffff)), WatchPort: b.GetWatchPort(), Actions: Actions(b.GetActions())})
	}
	return out
}

func Meter(m *pb.Meter) *flow.Meter {
	out := &flow.Meter{ID: m.GetId(), Unit: flow.MeterUnit(min(m.GetUnit(), 255))}
	for _, b := range m.GetBands() {
		out.Bands = append(out.Bands, flow.MeterBand{Rate: b.GetRate(), Burst: b.GetBurst()})
	}
	return out
}

func opKind(op uint32) flow.OpKind { return flow.OpKind(min(op, 255)) }

// Batch converts a batch: meters, groups, then flows in their order (the
// order the host applies them in). Batch.Validate on the result checks its
// shape. Flows are allocated in slabs, one allocation per kind.
func Batch(b *pb.Batch) *flow.Batch {
	out := &flow.Batch{Ops: make([]flow.Op, 0, len(b.GetFlows())+len(b.GetGroups())+len(b.GetMeters()))}
	for _, m := range b.GetMeters() {
		out.Ops = append(out.Ops, flow.Op{Kind: opKind(m.GetOp()), Meter: Meter(m)})
	}
	for _, g := range b.GetGroups() {
		out.Ops = append(out.Ops, flow.Op{Kind: opKind(g.GetOp()), Group: Group(g)})
	}
	nm := 0
	for _, f := range b.GetFlows() {
		nm += len(f.GetMatch())
	}
	flows := make([]flow.Flow, len(b.GetFlows()))
	fields := make([]flow.MatchField, nm)
	for i, f := range b.GetFlows() {
		n := len(f.GetMatch())
		flowInto(&flows[i], f, fields[:n:n])
		fields = fields[n:]
		out.Ops = append(out.Ops, flow.Op{Kind: opKind(f.GetOp()), Flow: &flows[i], TagMask: f.GetTagMask()})
	}
	return out
}
