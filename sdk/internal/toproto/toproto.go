// Package toproto converts SDK types into wire messages. Every function is
// pure: one Go type in, one message out. Its inverse lives in fromproto;
// the round trip is tested there.
package toproto

import (
	"switchyard.dev/switchyard/sdk/flow"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

func Field(f flow.Field) *pb.Field { return &pb.Field{Name: f.Name, Width: uint32(f.Width)} }

func Bits(b flow.Bits) *pb.Bits {
	return &pb.Bits{Reg: uint32(b.Reg), Offset: uint32(b.Offset), Width: uint32(b.Width)}
}

func MatchField(m flow.MatchField) *pb.MatchField {
	out := &pb.MatchField{Kind: uint32(m.Kind), Value: m.Value, Mask: m.Mask}
	if m.Kind == flow.MatchRegField {
		out.Field = Field(m.Field)
	}
	return out
}

func Jump(j flow.Jump) *pb.Jump {
	if j.Kind == flow.JumpNone {
		return nil
	}
	return &pb.Jump{Kind: uint32(j.Kind), Stage: uint32(j.Stage), Pipeline: uint32(j.Pipeline), Table: j.Table}
}

func Action(a flow.Action) *pb.Action {
	out := &pb.Action{Kind: uint32(a.Kind), Port: a.Port, SetKind: uint32(a.SetKind), Value: a.Value, Uint: a.Uint, MaxLen: uint32(a.MaxLen), Userdata: a.Userdata}
	if a.Field.Name != "" {
		out.Field = Field(a.Field)
	}
	if a.From.Name != "" {
		out.From = Field(a.From)
	}
	if a.CT != nil {
		out.Ct = &pb.CT{Commit: a.CT.Commit, Zone: uint32(a.CT.Zone), Resume: Jump(a.CT.Resume), Mark: a.CT.Mark, MarkMask: a.CT.MarkMask, Nat: a.CT.NAT}
	}
	return out
}

func Actions(as []flow.Action) []*pb.Action {
	if len(as) == 0 {
		return nil
	}
	out := make([]*pb.Action, len(as))
	for i, a := range as {
		out[i] = Action(a)
	}
	return out
}

func Flow(f *flow.Flow) *pb.Flow {
	fields := f.Match.Fields()
	out := &pb.Flow{
		Table: f.Table, Priority: uint32(f.Priority), Actions: Actions(f.Actions), Goto: Jump(f.Goto),
		Tag: f.Tag, IdleTimeout: uint32(f.IdleTimeout), HardTimeout: uint32(f.HardTimeout),
		Match: make([]*pb.MatchField, len(fields)),
	}
	for i, m := range fields {
		out.Match[i] = MatchField(m)
	}
	return out
}

func Group(g *flow.Group) *pb.Group {
	out := &pb.Group{Id: g.ID, Type: uint32(g.Type)}
	for _, b := range g.Buckets {
		out.Buckets = append(out.Buckets, &pb.Bucket{Weight: uint32(b.Weight), WatchPort: b.WatchPort, Actions: Actions(b.Actions)})
	}
	return out
}

func Meter(m *flow.Meter) *pb.Meter {
	out := &pb.Meter{Id: m.ID, Unit: uint32(m.Unit)}
	for _, b := range m.Bands {
		out.Bands = append(out.Bands, &pb.MeterBand{Rate: b.Rate, Burst: b.Burst})
	}
	return out
}

func Batch(b *flow.Batch) *pb.Batch {
	out := &pb.Batch{Ops: make([]*pb.Op, len(b.Ops))}
	for i, o := range b.Ops {
		op := &pb.Op{Kind: uint32(o.Kind)}
		switch {
		case o.Flow != nil:
			op.Object = &pb.Op_Flow{Flow: Flow(o.Flow)}
		case o.Group != nil:
			op.Object = &pb.Op_Group{Group: Group(o.Group)}
		case o.Meter != nil:
			op.Object = &pb.Op_Meter{Meter: Meter(o.Meter)}
		}
		out.Ops[i] = op
	}
	return out
}
