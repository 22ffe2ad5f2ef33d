// Package fastwire encodes and decodes flow batches — the hot path of a
// plugin installing 100,000 flows — straight between package flow's types
// and the protobuf wire format of switchyard.plugin.v1.Batch, without
// building generated message objects in between (which cost about a dozen
// allocations per flow on each side).
//
// The bytes are exactly a serialized Batch message, so the .proto stays the
// contract: tests check that the generated code decodes what Append writes
// and that Decode reads what the generated code writes, and a fuzz test
// feeds Decode arbitrary bytes. Groups and meters are rare and go through
// the generated code.
package fastwire

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/internal/fromproto"
	"switchyard.dev/switchyard/sdk/internal/toproto"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

// Field numbers from plugin.proto.
const (
	batchFlows, batchGroups, batchMeters = 1, 2, 3

	flowTable, flowPriority, flowMatch, flowActions, flowGoto, flowTag, flowIdle, flowHard, flowOp = 1, 2, 3, 4, 5, 6, 7, 8, 9

	mfKind, mfField, mfValue, mfMask = 1, 2, 3, 4

	fieldName, fieldWidth = 1, 2

	jumpKind, jumpStage, jumpPipeline, jumpTable = 1, 2, 3, 4

	ctCommit, ctZone, ctResume, ctMark, ctMarkMask, ctNAT = 1, 2, 3, 4, 5, 6

	actKind, actPort, actField, actFrom, actSetKind, actValue, actUint, actMaxLen, actUserdata, actCT = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
)

// encoder appends nested messages: each level encodes into its own scratch
// buffer, then the parent appends it length-prefixed.
type encoder struct{ scratch [4][]byte }

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendStringField(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}

func appendField(b []byte, f flow.Field) []byte {
	b = appendStringField(b, fieldName, f.Name)
	return appendVarintField(b, fieldWidth, uint64(f.Width))
}

func appendJump(b []byte, j flow.Jump) []byte {
	b = appendVarintField(b, jumpKind, uint64(j.Kind))
	b = appendVarintField(b, jumpStage, uint64(j.Stage))
	b = appendVarintField(b, jumpPipeline, uint64(j.Pipeline))
	return appendStringField(b, jumpTable, j.Table)
}

func boolVal(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func (e *encoder) appendAction(b []byte, a *flow.Action) []byte {
	b = appendVarintField(b, actKind, uint64(a.Kind))
	b = appendVarintField(b, actPort, uint64(a.Port))
	if a.Field.Name != "" {
		b = appendMessage(b, actField, appendField(e.scratch[2][:0], a.Field))
	}
	if a.From.Name != "" {
		b = appendMessage(b, actFrom, appendField(e.scratch[2][:0], a.From))
	}
	b = appendVarintField(b, actSetKind, uint64(a.SetKind))
	b = appendBytesField(b, actValue, a.Value)
	b = appendVarintField(b, actUint, a.Uint)
	b = appendVarintField(b, actMaxLen, uint64(a.MaxLen))
	b = appendBytesField(b, actUserdata, a.Userdata)
	if c := a.CT; c != nil {
		ct := e.scratch[2][:0]
		ct = appendVarintField(ct, ctCommit, boolVal(c.Commit))
		ct = appendVarintField(ct, ctZone, uint64(c.Zone))
		if c.Resume.Kind != flow.JumpNone {
			ct = appendMessage(ct, ctResume, appendJump(e.scratch[3][:0], c.Resume))
		}
		ct = appendVarintField(ct, ctMark, uint64(c.Mark))
		ct = appendVarintField(ct, ctMarkMask, uint64(c.MarkMask))
		ct = appendVarintField(ct, ctNAT, boolVal(c.NAT))
		e.scratch[2] = ct
		b = appendMessage(b, actCT, ct)
	}
	return b
}

func (e *encoder) appendFlow(b []byte, f *flow.Flow, op flow.OpKind) []byte {
	b = appendStringField(b, flowTable, f.Table)
	b = appendVarintField(b, flowPriority, uint64(f.Priority))
	for _, m := range f.Match.Fields() {
		mf := e.scratch[1][:0]
		mf = appendVarintField(mf, mfKind, uint64(m.Kind))
		if m.Kind == flow.MatchRegField {
			mf = appendMessage(mf, mfField, appendField(e.scratch[2][:0], m.Field))
		}
		mf = appendBytesField(mf, mfValue, m.Value)
		mf = appendBytesField(mf, mfMask, m.Mask)
		e.scratch[1] = mf
		b = appendMessage(b, flowMatch, mf)
	}
	for i := range f.Actions {
		act := e.appendAction(e.scratch[1][:0], &f.Actions[i])
		e.scratch[1] = act
		b = appendMessage(b, flowActions, act)
	}
	if f.Goto.Kind != flow.JumpNone {
		b = appendMessage(b, flowGoto, appendJump(e.scratch[1][:0], f.Goto))
	}
	b = appendVarintField(b, flowTag, uint64(f.Tag))
	b = appendVarintField(b, flowIdle, uint64(f.IdleTimeout))
	b = appendVarintField(b, flowHard, uint64(f.HardTimeout))
	return appendVarintField(b, flowOp, uint64(op))
}

// Append appends the encoded batch to b. The result is a serialized
// switchyard.plugin.v1.Batch.
func Append(b []byte, batch *flow.Batch) ([]byte, error) {
	var e encoder
	for _, o := range batch.Ops {
		switch {
		case o.Flow != nil:
			fb := e.appendFlow(e.scratch[0][:0], o.Flow, o.Kind)
			e.scratch[0] = fb
			b = appendMessage(b, batchFlows, fb)
		case o.Group != nil:
			g := toproto.Group(o.Group)
			g.Op = uint32(o.Kind)
			raw, err := proto.Marshal(g)
			if err != nil {
				return nil, err
			}
			b = appendMessage(b, batchGroups, raw)
		case o.Meter != nil:
			m := toproto.Meter(o.Meter)
			m.Op = uint32(o.Kind)
			raw, err := proto.Marshal(m)
			if err != nil {
				return nil, err
			}
			b = appendMessage(b, batchMeters, raw)
		}
	}
	return b, nil
}

// ErrMalformed is returned for bytes that are not a valid Batch.
var ErrMalformed = errors.New("malformed batch")

// reader walks one message's fields, keeping the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrMalformed, what)
	}
}

// next returns the next field's number, wire type and, for varints, value;
// for length-delimited fields, the bytes.
func (r *reader) next() (num protowire.Number, typ protowire.Type, v uint64, data []byte, ok bool) {
	if r.err != nil || len(r.b) == 0 {
		return 0, 0, 0, nil, false
	}
	num, typ, n := protowire.ConsumeTag(r.b)
	if n < 0 {
		r.fail("bad tag")
		return 0, 0, 0, nil, false
	}
	r.b = r.b[n:]
	switch typ {
	case protowire.VarintType:
		v, n = protowire.ConsumeVarint(r.b)
	case protowire.BytesType:
		data, n = protowire.ConsumeBytes(r.b)
	default:
		n = protowire.ConsumeFieldValue(num, typ, r.b)
	}
	if n < 0 {
		r.fail(fmt.Sprintf("bad value of field %d", num))
		return 0, 0, 0, nil, false
	}
	r.b = r.b[n:]
	return num, typ, v, data, true
}

// small clamps a varint into a field of width bits.
func small(v uint64, max uint64) uint64 { return min(v, max) }

func decodeField(data []byte) (flow.Field, error) {
	r := reader{b: data}
	var f flow.Field
	for num, typ, v, d, ok := r.next(); ok; num, typ, v, d, ok = r.next() {
		switch {
		case num == fieldName && typ == protowire.BytesType:
			f.Name = string(d)
		case num == fieldWidth && typ == protowire.VarintType:
			f.Width = uint8(small(v, 255))
		}
	}
	return f, r.err
}

func decodeJump(data []byte) (flow.Jump, error) {
	r := reader{b: data}
	var j flow.Jump
	for num, typ, v, d, ok := r.next(); ok; num, typ, v, d, ok = r.next() {
		switch {
		case num == jumpKind && typ == protowire.VarintType:
			j.Kind = flow.JumpKind(small(v, 255))
		case num == jumpStage && typ == protowire.VarintType:
			j.Stage = flow.Stage(small(v, 255))
		case num == jumpPipeline && typ == protowire.VarintType:
			j.Pipeline = flow.Pipeline(small(v, 255))
		case num == jumpTable && typ == protowire.BytesType:
			j.Table = string(d)
		}
	}
	return j, r.err
}

func decodeCT(data []byte) (*flow.CT, error) {
	r := reader{b: data}
	c := &flow.CT{}
	for num, typ, v, d, ok := r.next(); ok; num, typ, v, d, ok = r.next() {
		if typ == protowire.BytesType {
			if num == ctResume {
				j, err := decodeJump(d)
				if err != nil {
					return nil, err
				}
				c.Resume = j
			}
			continue
		}
		if typ != protowire.VarintType {
			continue
		}
		switch num {
		case ctCommit:
			c.Commit = v != 0
		case ctZone:
			c.Zone = uint16(small(v, 0xffff))
		case ctMark:
			c.Mark = uint32(small(v, 0xffffffff))
		case ctMarkMask:
			c.MarkMask = uint32(small(v, 0xffffffff))
		case ctNAT:
			c.NAT = v != 0
		}
	}
	return c, r.err
}

func decodeAction(data []byte) (flow.Action, error) {
	r := reader{b: data}
	var a flow.Action
	var err error
	for num, typ, v, d, ok := r.next(); ok; num, typ, v, d, ok = r.next() {
		if typ == protowire.VarintType {
			switch num {
			case actKind:
				a.Kind = flow.ActionKind(small(v, 255))
			case actPort:
				a.Port = uint32(small(v, 0xffffffff))
			case actSetKind:
				a.SetKind = flow.MatchKind(small(v, 255))
			case actUint:
				a.Uint = v
			case actMaxLen:
				a.MaxLen = uint16(small(v, 0xffff))
			}
			continue
		}
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case actField:
			a.Field, err = decodeField(d)
		case actFrom:
			a.From, err = decodeField(d)
		case actValue:
			a.Value = cloneOrNil(d)
		case actUserdata:
			a.Userdata = cloneOrNil(d)
		case actCT:
			a.CT, err = decodeCT(d)
		}
		if err != nil {
			return a, err
		}
	}
	return a, r.err
}

// cloneOrNil copies d: the decoded batch outlives the request buffer.
func cloneOrNil(d []byte) []byte {
	if len(d) == 0 {
		return nil
	}
	return append([]byte(nil), d...)
}

func decodeMatchField(data []byte, arena *[]byte) (flow.MatchField, error) {
	r := reader{b: data}
	var m flow.MatchField
	var err error
	for num, typ, v, d, ok := r.next(); ok; num, typ, v, d, ok = r.next() {
		switch {
		case num == mfKind && typ == protowire.VarintType:
			m.Kind = flow.MatchKind(small(v, 255))
		case num == mfField && typ == protowire.BytesType:
			if m.Field, err = decodeField(d); err != nil {
				return m, err
			}
		case num == mfValue && typ == protowire.BytesType && len(d) > 0:
			m.Value = carve(arena, d)
		case num == mfMask && typ == protowire.BytesType && len(d) > 0:
			m.Mask = carve(arena, d)
		}
	}
	if m.Kind != flow.MatchRegField {
		m.Field = flow.Field{}
	}
	return m, r.err
}

// carve copies d into the arena (one allocation for many small values) and
// returns the copy with its capacity clipped.
func carve(arena *[]byte, d []byte) []byte {
	if cap(*arena)-len(*arena) < len(d) {
		*arena = make([]byte, 0, max(4096, len(d)))
	}
	start := len(*arena)
	*arena = append(*arena, d...)
	return (*arena)[start:len(*arena):len(*arena)]
}

type decodedFlow struct {
	f          flow.Flow
	op         flow.OpKind
	start, end int // match fields in the slab
	aStart     int // actions in the action slab
	aEnd       int
}

// slabs hold every flow's match fields, actions and byte values of one
// batch, so decoding allocates per batch rather than per flow.
type slabs struct {
	fields    []flow.MatchField
	actions   []flow.Action
	arena     []byte
	lastTable string
}

func decodeFlow(data []byte, sl *slabs) (decodedFlow, error) {
	slab, arena := &sl.fields, &sl.arena
	r := reader{b: data}
	out := decodedFlow{start: len(*slab), aStart: len(sl.actions)}
	f := &out.f
	for num, typ, v, d, ok := r.next(); ok; num, typ, v, d, ok = r.next() {
		if typ == protowire.VarintType {
			switch num {
			case flowPriority:
				f.Priority = uint16(small(v, 0xffff))
			case flowTag:
				f.Tag = uint32(small(v, 0xffffffff))
			case flowIdle:
				f.IdleTimeout = uint16(small(v, 0xffff))
			case flowHard:
				f.HardTimeout = uint16(small(v, 0xffff))
			case flowOp:
				out.op = flow.OpKind(small(v, 255))
			}
			continue
		}
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case flowTable:
			// Batches name few tables; reuse the previous flow's string.
			if string(d) == sl.lastTable {
				f.Table = sl.lastTable
			} else {
				f.Table = string(d)
				sl.lastTable = f.Table
			}
		case flowMatch:
			m, err := decodeMatchField(d, arena)
			if err != nil {
				return out, err
			}
			*slab = append(*slab, m)
		case flowActions:
			a, err := decodeAction(d)
			if err != nil {
				return out, err
			}
			sl.actions = append(sl.actions, a)
		case flowGoto:
			j, err := decodeJump(d)
			if err != nil {
				return out, err
			}
			f.Goto = j
		}
	}
	out.end, out.aEnd = len(*slab), len(sl.actions)
	return out, r.err
}

// Decode reads a serialized Batch. Order: meters, groups, then flows in
// their order (the order the host applies them in). Batch.Validate checks
// the result's shape; Decode only checks the encoding.
func Decode(data []byte) (*flow.Batch, error) {
	// A first pass counts the flows so every slab is allocated once.
	n := 0
	for pre := (reader{b: data}); ; {
		num, typ, _, _, ok := pre.next()
		if !ok {
			break
		}
		if num == batchFlows && typ == protowire.BytesType {
			n++
		}
	}
	r := reader{b: data}
	var meters, groups []flow.Op
	flows := make([]decodedFlow, 0, n)
	// Values are a small part of the encoding; the arena grows in chunks.
	sl := &slabs{fields: make([]flow.MatchField, 0, 3*n), actions: make([]flow.Action, 0, 2*n), arena: make([]byte, 0, max(4096, len(data)/8))}
	for num, typ, _, d, ok := r.next(); ok; num, typ, _, d, ok = r.next() {
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case batchFlows:
			f, err := decodeFlow(d, sl)
			if err != nil {
				return nil, err
			}
			flows = append(flows, f)
		case batchGroups:
			var g pb.Group
			if err := proto.Unmarshal(d, &g); err != nil {
				return nil, fmt.Errorf("%w: group: %v", ErrMalformed, err)
			}
			groups = append(groups, flow.Op{Kind: flow.OpKind(small(uint64(g.GetOp()), 255)), Group: fromproto.Group(&g)})
		case batchMeters:
			var m pb.Meter
			if err := proto.Unmarshal(d, &m); err != nil {
				return nil, fmt.Errorf("%w: meter: %v", ErrMalformed, err)
			}
			meters = append(meters, flow.Op{Kind: flow.OpKind(small(uint64(m.GetOp()), 255)), Meter: fromproto.Meter(&m)})
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	// The host keeps decoded flows for as long as they are installed: trim
	// the slabs to what was used so spare capacity is not kept with them.
	if cap(sl.fields) > len(sl.fields)+len(sl.fields)/8 {
		sl.fields = append([]flow.MatchField(nil), sl.fields...)
	}
	if cap(sl.actions) > len(sl.actions)+len(sl.actions)/8 {
		sl.actions = append([]flow.Action(nil), sl.actions...)
	}
	out := &flow.Batch{Ops: make([]flow.Op, 0, len(meters)+len(groups)+len(flows))}
	out.Ops = append(append(out.Ops, meters...), groups...)
	for i := range flows {
		f := &flows[i]
		f.f.Match = flow.MatchOf(sl.fields[f.start:f.end:f.end]...)
		if f.aEnd > f.aStart {
			f.f.Actions = sl.actions[f.aStart:f.aEnd:f.aEnd]
		}
		out.Ops = append(out.Ops, flow.Op{Kind: f.op, Flow: &f.f})
	}
	return out, nil
}

// AppendFlow appends f alone in its wire form (a serialized Flow message,
// without the operation): the compact form in which the host keeps the
// flows it installed.
func AppendFlow(b []byte, f *flow.Flow) []byte {
	var e encoder
	return e.appendFlow(b, f, 0)
}

// FlowEncoder is AppendFlow with scratch buffers kept between calls, for
// encoding many flows one after the other without allocating.
type FlowEncoder struct{ e encoder }

// Append is AppendFlow.
func (fe *FlowEncoder) Append(b []byte, f *flow.Flow) []byte { return fe.e.appendFlow(b, f, 0) }

// DecodeFlow reads one flow written by AppendFlow. The flow owns its
// memory: nothing refers back to data.
func DecodeFlow(data []byte) (*flow.Flow, error) {
	sl := &slabs{}
	d, err := decodeFlow(data, sl)
	if err != nil {
		return nil, err
	}
	f := &d.f
	f.Match = flow.MatchOf(sl.fields...)
	if len(sl.actions) > 0 {
		f.Actions = sl.actions
	}
	return f, nil
}
