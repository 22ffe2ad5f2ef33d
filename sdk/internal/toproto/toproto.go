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

func flowInto(out *pb.Flow, f *flow.Flow, fields []pb.MatchField, ptrs []*pb.MatchField) {
	out.Table, out.Priority, out.Actions, out.Goto = f.Table, uint32(f.Priority), Actions(f.Actions), Jump(f.Goto)
	out.Tag, out.IdleTimeout, out.HardTimeout = f.Tag, uint32(f.IdleTimeout), uint32(f.HardTimeout)
	for i, m := range f.Match.Fields() {
		fields[i].Kind, fields[i].Value, fields[i].Mask = uint32(m.Kind), m.Value, m.Mask
		if m.Kind == flow.MatchRegField {
			fields[i].Field = Field(m.Field)
		}
		ptrs[i] = &fields[i]
	}
	out.Match = ptrs
}

// Flow converts one flow.
func Flow(f *flow.Flow) *pb.Flow {
	n := f.Match.Len()
	out := &pb.Flow{}
	flowInto(out, f, make([]pb.MatchField, n), make([]*pb.MatchField, n))
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

// Batch converts a batch. Flows are allocated in slabs: a batch is
// thousands of small messages, and one allocation per kind keeps the
// garbage collector out of the submission path.
func Batch(b *flow.Batch) *pb.Batch {
	nf, nm := 0, 0
	for _, o := range b.Ops {
		if o.Flow != nil {
			nf++
			nm += o.Flow.Match.Len()
		}
	}
	out := &pb.Batch{Flows: make([]*pb.Flow, 0, nf)}
	flows := make([]pb.Flow, nf)
	fields := make([]pb.MatchField, nm)
	ptrs := make([]*pb.MatchField, nm)
	for _, o := range b.Ops {
		switch {
		case o.Flow != nil:
			f := &flows[len(out.Flows)]
			n := o.Flow.Match.Len()
			flowInto(f, o.Flow, fields[:n:n], ptrs[:n:n])
			fields, ptrs = fields[n:], ptrs[n:]
			f.Op, f.TagMask = uint32(o.Kind), o.TagMask
			out.Flows = append(out.Flows, f)
		case o.Group != nil:
			g := Group(o.Group)
			g.Op = uint32(o.Kind)
			out.Groups = append(out.Groups, g)
		case o.Meter != nil:
			m := Meter(o.Meter)
			m.Op = uint32(o.Kind)
			out.Meters = append(out.Meters, m)
		}
	}
	return out
}
