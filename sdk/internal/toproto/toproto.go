// Package toproto converts SDK types into wire messages. Every function is
// pure: one Go type in, one message out. Its inverse lives in fromproto;
// the round trip is tested there.
package toproto

import (
	"net/netip"

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

// Operand converts a move/learn operand; the zero Operand is nil.
func Operand(o flow.Operand) *pb.Operand {
	if f, ok := o.Reg(); ok {
		return &pb.Operand{Field: Field(f)}
	}
	if k, ofs, w, ok := o.Header(); ok {
		return &pb.Operand{Header: uint32(k), Offset: uint32(ofs), Width: uint32(w)}
	}
	return nil
}

func addrBytes(a netip.Addr) []byte {
	if !a.IsValid() {
		return nil
	}
	return a.AsSlice()
}

func NAT(n *flow.NAT) *pb.NAT {
	if n == nil {
		return nil
	}
	return &pb.NAT{Kind: uint32(n.Kind), MinAddr: addrBytes(n.MinAddr), MaxAddr: addrBytes(n.MaxAddr),
		MinPort: uint32(n.MinPort), MaxPort: uint32(n.MaxPort), Persistent: n.Persistent, Selection: uint32(n.Selection)}
}

func CT(c *flow.ActCT) *pb.CT {
	out := &pb.CT{Commit: c.Commit, Zone: uint32(c.Zone), Resume: Jump(c.Resume), Mark: c.Mark, MarkMask: c.MarkMask, Nat: NAT(c.NAT)}
	if !c.LabelMask.IsZero() {
		out.Label, out.LabelMask = c.Label.Bytes(), c.LabelMask.Bytes()
	}
	return out
}

func Learn(l *flow.ActLearn) *pb.Learn {
	out := &pb.Learn{Table: l.Table, Priority: uint32(l.Priority), IdleTimeout: uint32(l.IdleTimeout), HardTimeout: uint32(l.HardTimeout)}
	for _, sp := range l.Specs {
		out.Specs = append(out.Specs, &pb.LearnSpec{Kind: uint32(sp.Kind), Dst: Operand(sp.Dst), Src: Operand(sp.Src), Value: sp.Value})
	}
	return out
}

// Action converts one action. A nil action (or one this package does not
// know) becomes kind ACTION_UNKNOWN, which the host refuses.
func Action(a flow.Action) *pb.Action {
	k := func(k pb.ActionKind) uint32 { return uint32(k) }
	switch a := a.(type) {
	case *flow.ActOutput:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_OUTPUT), Port: a.Port}
	case *flow.ActOutputField:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_OUTPUT_FIELD), Field: Field(a.Field)}
	case *flow.ActInPort:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_IN_PORT)}
	case *flow.ActNormal:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_NORMAL)}
	case *flow.ActController:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_CONTROLLER), MaxLen: uint32(a.MaxLen), Userdata: a.Userdata, Reason: uint32(a.Reason), Uint: uint64(a.Meter)}
	case *flow.ActSetField:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_SET_FIELD), SetKind: uint32(a.Kind), Value: a.Value, Mask: a.Mask}
	case *flow.ActLoad:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_LOAD), Field: Field(a.Field), Uint: uint64(a.Value)}
	case *flow.ActMove:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_MOVE), MoveFrom: Operand(a.From), MoveTo: Operand(a.To)}
	case *flow.ActCT:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_CT), Ct: CT(a)}
	case *flow.ActCTClear:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_CT_CLEAR)}
	case *flow.ActGroup:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_GROUP), Uint: uint64(a.ID)}
	case *flow.ActMeter:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_METER), Uint: uint64(a.ID)}
	case *flow.ActDecTTL:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_DEC_TTL)}
	case *flow.ActPushVLAN:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_PUSH_VLAN), Uint: uint64(a.TPID)}
	case *flow.ActPopVLAN:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_POP_VLAN)}
	case *flow.ActConjunction:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_CONJUNCTION), Uint: uint64(a.ID), Port: uint32(a.Clause)<<8 | uint32(a.NClauses)}
	case *flow.ActResubmit:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_RESUBMIT), Jump: Jump(a.To)}
	case *flow.ActNote:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_NOTE), Value: a.Data}
	case *flow.ActLearn:
		return &pb.Action{Kind: k(pb.ActionKind_ACTION_LEARN), Learn: Learn(a)}
	}
	return &pb.Action{}
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
	if sel := g.Selection; sel != nil {
		out.Selection = &pb.Selection{Method: uint32(sel.Method)}
		for _, k := range sel.Fields {
			out.Selection.Fields = append(out.Selection.Fields, uint32(k))
		}
	}
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
