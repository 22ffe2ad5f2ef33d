// Package fromproto converts wire messages into SDK types. Every function is
// pure and the inverse of its namesake in toproto. Messages come from another
// process, so malformed values (bad addresses, out-of-range enums) are
// reported as errors rather than trusted.
package fromproto

import (
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

func Action(a *pb.Action) flow.Action {
	out := flow.Action{
		Kind: flow.ActionKind(min(a.GetKind(), 255)), Port: a.GetPort(), Field: Field(a.GetField()), From: Field(a.GetFrom()),
		SetKind: flow.MatchKind(min(a.GetSetKind(), 255)), Value: a.GetValue(), Uint: a.GetUint(),
		MaxLen: uint16(min(a.GetMaxLen(), 0xffff)), Userdata: a.GetUserdata(),
	}
	if len(out.Value) == 0 {
		out.Value = nil
	}
	if len(out.Userdata) == 0 {
		out.Userdata = nil
	}
	if c := a.GetCt(); c != nil {
		out.CT = &flow.CT{Commit: c.GetCommit(), Zone: uint16(c.GetZone()), Resume: Jump(c.GetResume()), Mark: c.GetMark(), MarkMask: c.GetMarkMask(), NAT: c.GetNat()}
	}
	return out
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
