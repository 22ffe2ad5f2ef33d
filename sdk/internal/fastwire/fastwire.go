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
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"unsafe"

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
	flowTagMask                                                                                    = 20

	mfKind, mfField, mfValue, mfMask = 1, 2, 3, 4

	fieldName, fieldWidth = 1, 2

	jumpKind, jumpStage, jumpPipeline, jumpTable = 1, 2, 3, 4

	ctCommit, ctZone, ctResume, ctMark, ctMarkMask, ctNAT, ctLabel, ctLabelMask = 1, 2, 3, 4, 5, 20, 21, 22

	natKind, natMinAddr, natMaxAddr, natMinPort, natMaxPort, natPersistent, natSelection = 1, 2, 3, 4, 5, 6, 7

	opField, opHeader, opOffset, opWidth = 1, 2, 3, 4

	actKind, actPort, actField, actSetKind, actValue, actUint, actMaxLen, actUserdata, actCT = 1, 2, 3, 5, 6, 7, 8, 9, 10
	actMoveFrom, actMoveTo, actMask, actReason, actJump, actLearn                            = 20, 21, 22, 23, 24, 25

	learnTable, learnPriority, learnIdle, learnHard, learnSpecs = 1, 2, 3, 4, 5

	specKind, specDst, specSrc, specValue = 1, 2, 3, 4
)

// encoder appends nested messages: each level encodes into its own scratch
// buffer, then the parent appends it length-prefixed.
type encoder struct{ scratch [6][]byte }

// field, jump and operand encode a nested message into the scratch
// buffer of level i and keep the buffer for the next one.
func (e *encoder) field(i int, f flow.Field) []byte {
	e.scratch[i] = appendField(e.scratch[i][:0], f)
	return e.scratch[i]
}

func (e *encoder) jump(i int, j flow.Jump) []byte {
	e.scratch[i] = appendJump(e.scratch[i][:0], j)
	return e.scratch[i]
}

func (e *encoder) operand(i int, o flow.Operand) []byte {
	b := e.scratch[i][:0]
	if f, ok := o.Reg(); ok {
		b = appendMessage(b, opField, e.field(i+1, f))
	} else if k, ofs, w, ok := o.Header(); ok {
		b = appendVarintField(b, opHeader, uint64(k))
		b = appendVarintField(b, opOffset, uint64(ofs))
		b = appendVarintField(b, opWidth, uint64(w))
	}
	e.scratch[i] = b
	return b
}

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

func appendAddr(b []byte, num protowire.Number, a netip.Addr) []byte {
	switch {
	case a.Is4():
		v := a.As4()
		return appendBytesField(b, num, v[:])
	case a.IsValid():
		v := a.As16()
		return appendBytesField(b, num, v[:])
	}
	return b
}

func (e *encoder) appendCT(b []byte, c *flow.ActCT) []byte {
	b = appendVarintField(b, ctCommit, boolVal(c.Commit))
	b = appendVarintField(b, ctZone, uint64(c.Zone))
	if c.Resume.Kind != flow.JumpNone {
		b = appendMessage(b, ctResume, e.jump(3, c.Resume))
	}
	b = appendVarintField(b, ctMark, uint64(c.Mark))
	b = appendVarintField(b, ctMarkMask, uint64(c.MarkMask))
	if n := c.NAT; n != nil {
		nb := e.scratch[3][:0]
		nb = appendVarintField(nb, natKind, uint64(n.Kind))
		nb = appendAddr(nb, natMinAddr, n.MinAddr)
		nb = appendAddr(nb, natMaxAddr, n.MaxAddr)
		nb = appendVarintField(nb, natMinPort, uint64(n.MinPort))
		nb = appendVarintField(nb, natMaxPort, uint64(n.MaxPort))
		nb = appendVarintField(nb, natPersistent, boolVal(n.Persistent))
		nb = appendVarintField(nb, natSelection, uint64(n.Selection))
		e.scratch[3] = nb
		b = appendMessage(b, ctNAT, nb)
	}
	if !c.LabelMask.IsZero() {
		var v [16]byte
		binary.BigEndian.PutUint64(v[:8], c.Label.Hi)
		binary.BigEndian.PutUint64(v[8:], c.Label.Lo)
		b = appendBytesField(b, ctLabel, v[:])
		binary.BigEndian.PutUint64(v[:8], c.LabelMask.Hi)
		binary.BigEndian.PutUint64(v[8:], c.LabelMask.Lo)
		b = appendBytesField(b, ctLabelMask, v[:])
	}
	return b
}

func kind(k pb.ActionKind) uint64 { return uint64(k) }

// appendAction appends the fields of one Action message; it mirrors
// toproto.Action field by field (TestAgreesWithGeneratedCode checks).
func (e *encoder) appendAction(b []byte, a flow.Action) ([]byte, error) {
	switch a := a.(type) {
	case *flow.ActOutput:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_OUTPUT))
		b = appendVarintField(b, actPort, uint64(a.Port))
	case *flow.ActOutputField:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_OUTPUT_FIELD))
		b = appendMessage(b, actField, e.field(2, a.Field))
	case *flow.ActInPort:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_IN_PORT))
	case *flow.ActNormal:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_NORMAL))
	case *flow.ActController:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_CONTROLLER))
		b = appendVarintField(b, actUint, uint64(a.Meter))
		b = appendVarintField(b, actMaxLen, uint64(a.MaxLen))
		b = appendBytesField(b, actUserdata, a.Userdata)
		b = appendVarintField(b, actReason, uint64(a.Reason))
	case *flow.ActSetField:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_SET_FIELD))
		b = appendVarintField(b, actSetKind, uint64(a.Kind))
		b = appendBytesField(b, actValue, a.Value)
		b = appendBytesField(b, actMask, a.Mask)
	case *flow.ActLoad:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_LOAD))
		b = appendMessage(b, actField, e.field(2, a.Field))
		b = appendVarintField(b, actUint, uint64(a.Value))
	case *flow.ActMove:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_MOVE))
		if a.From != (flow.Operand{}) {
			b = appendMessage(b, actMoveFrom, e.operand(2, a.From))
		}
		if a.To != (flow.Operand{}) {
			b = appendMessage(b, actMoveTo, e.operand(2, a.To))
		}
	case *flow.ActCT:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_CT))
		ct := e.appendCT(e.scratch[2][:0], a)
		e.scratch[2] = ct
		b = appendMessage(b, actCT, ct)
	case *flow.ActCTClear:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_CT_CLEAR))
	case *flow.ActGroup:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_GROUP))
		b = appendVarintField(b, actUint, uint64(a.ID))
	case *flow.ActMeter:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_METER))
		b = appendVarintField(b, actUint, uint64(a.ID))
	case *flow.ActDecTTL:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_DEC_TTL))
	case *flow.ActPushVLAN:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_PUSH_VLAN))
		b = appendVarintField(b, actUint, uint64(a.TPID))
	case *flow.ActPopVLAN:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_POP_VLAN))
	case *flow.ActConjunction:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_CONJUNCTION))
		b = appendVarintField(b, actPort, uint64(a.Clause)<<8|uint64(a.NClauses))
		b = appendVarintField(b, actUint, uint64(a.ID))
	case *flow.ActResubmit:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_RESUBMIT))
		if a.To.Kind != flow.JumpNone {
			b = appendMessage(b, actJump, e.jump(2, a.To))
		}
	case *flow.ActNote:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_NOTE))
		b = appendBytesField(b, actValue, a.Data)
	case *flow.ActLearn:
		b = appendVarintField(b, actKind, kind(pb.ActionKind_ACTION_LEARN))
		b = appendMessage(b, actLearn, e.learn(a))
	default:
		// An action this encoder does not know goes through the generated
		// code (the bytes are the same Action message).
		return proto.MarshalOptions{}.MarshalAppend(b, toproto.Action(a))
	}
	return b, nil
}

// learn encodes a Learn message into scratch level 2; its specs use
// levels 3 and 4 (operands) and 5 (their register fields).
func (e *encoder) learn(a *flow.ActLearn) []byte {
	b := e.scratch[2][:0]
	b = appendStringField(b, learnTable, a.Table)
	b = appendVarintField(b, learnPriority, uint64(a.Priority))
	b = appendVarintField(b, learnIdle, uint64(a.IdleTimeout))
	b = appendVarintField(b, learnHard, uint64(a.HardTimeout))
	for _, sp := range a.Specs {
		sb := e.scratch[3][:0]
		sb = appendVarintField(sb, specKind, uint64(sp.Kind))
		if sp.Dst != (flow.Operand{}) {
			sb = appendMessage(sb, specDst, e.operand(4, sp.Dst))
		}
		if sp.Src != (flow.Operand{}) {
			sb = appendMessage(sb, specSrc, e.operand(4, sp.Src))
		}
		sb = appendVarintField(sb, specValue, sp.Value)
		e.scratch[3] = sb
		b = appendMessage(b, learnSpecs, sb)
	}
	e.scratch[2] = b
	return b
}

func (e *encoder) appendFlow(b []byte, f *flow.Flow, op flow.OpKind, tagMask uint32) ([]byte, error) {
	b = appendStringField(b, flowTable, f.Table)
	b = appendVarintField(b, flowPriority, uint64(f.Priority))
	for _, m := range f.Match.Fields() {
		mf := e.scratch[1][:0]
		mf = appendVarintField(mf, mfKind, uint64(m.Kind))
		if m.Kind == flow.MatchRegField {
			mf = appendMessage(mf, mfField, e.field(2, m.Field))
		}
		mf = appendBytesField(mf, mfValue, m.Value)
		mf = appendBytesField(mf, mfMask, m.Mask)
		e.scratch[1] = mf
		b = appendMessage(b, flowMatch, mf)
	}
	for _, a := range f.Actions {
		act, err := e.appendAction(e.scratch[1][:0], a)
		if err != nil {
			return b, err
		}
		e.scratch[1] = act
		b = appendMessage(b, flowActions, act)
	}
	if f.Goto.Kind != flow.JumpNone {
		b = appendMessage(b, flowGoto, e.jump(1, f.Goto))
	}
	b = appendVarintField(b, flowTag, uint64(f.Tag))
	b = appendVarintField(b, flowIdle, uint64(f.IdleTimeout))
	b = appendVarintField(b, flowHard, uint64(f.HardTimeout))
	b = appendVarintField(b, flowOp, uint64(op))
	return appendVarintField(b, flowTagMask, uint64(tagMask)), nil
}

// Append appends the encoded batch to b. The result is a serialized
// switchyard.plugin.v1.Batch.
func Append(b []byte, batch *flow.Batch) ([]byte, error) {
	var e encoder
	for _, o := range batch.Ops {
		switch {
		case o.Flow != nil:
			fb, err := e.appendFlow(e.scratch[0][:0], o.Flow, o.Kind, o.TagMask)
			if err != nil {
				return nil, err
			}
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

// slab hands out *T from chunks, so a batch's actions of one type cost a
// few allocations, not one each. A chunk is sized from how many actions
// of the type the flows decoded so far had, times the flows left, and
// capped at 64 KiB, so a type that appears once wastes little.
type slab[T any] struct {
	buf  []T
	used int
}

func (s *slab[T]) alloc(d *decoder) *T {
	if len(s.buf) == cap(s.buf) {
		seen := d.flow + 1
		left := max(d.nflows-d.flow, 1)
		need := max(s.used, 1) * left / seen
		if s.used == 0 {
			need = left
		}
		var zero T
		limit := max(8, 64<<10/max(int(unsafe.Sizeof(zero)), 1))
		s.buf = make([]T, 0, min(max(need, 8), limit))
	}
	s.buf = s.buf[:len(s.buf)+1]
	s.used++
	return &s.buf[len(s.buf)-1]
}

// decoder holds one batch's slabs and interned strings.
type decoder struct {
	flow, nflows int
	fields       []flow.MatchField
	actions      []flow.Action
	arena        []byte
	lastTable    string
	names        map[string]string

	output      slab[flow.ActOutput]
	outputField slab[flow.ActOutputField]
	controller  slab[flow.ActController]
	setField    slab[flow.ActSetField]
	load        slab[flow.ActLoad]
	move        slab[flow.ActMove]
	ct          slab[flow.ActCT]
	nat         slab[flow.NAT]
	group       slab[flow.ActGroup]
	meter       slab[flow.ActMeter]
	pushVLAN    slab[flow.ActPushVLAN]
	conj        slab[flow.ActConjunction]
	resubmit    slab[flow.ActResubmit]
	note        slab[flow.ActNote]
	learn       slab[flow.ActLearn]
	specs       []flow.LearnSpec
}

// Actions without parameters are shared: nothing can change them.
var (
	inPort  = &flow.ActInPort{}
	normal  = &flow.ActNormal{}
	ctClear = &flow.ActCTClear{}
	decTTL  = &flow.ActDecTTL{}
	popVLAN = &flow.ActPopVLAN{}
)

// name interns a register field or table name: a batch uses few.
func (d *decoder) name(b []byte) string {
	if s, ok := d.names[string(b)]; ok {
		return s
	}
	if d.names == nil {
		d.names = make(map[string]string)
	}
	s := string(b)
	d.names[s] = s
	return s
}

func (d *decoder) field(data []byte) (flow.Field, error) {
	r := reader{b: data}
	var f flow.Field
	for num, typ, v, b, ok := r.next(); ok; num, typ, v, b, ok = r.next() {
		switch {
		case num == fieldName && typ == protowire.BytesType:
			f.Name = d.name(b)
		case num == fieldWidth && typ == protowire.VarintType:
			f.Width = uint8(small(v, 255))
		}
	}
	return f, r.err
}

func (d *decoder) operand(data []byte) (flow.Operand, error) {
	r := reader{b: data}
	var k, ofs, w uint64
	var f flow.Field
	hasField := false
	var err error
	for num, typ, v, b, ok := r.next(); ok; num, typ, v, b, ok = r.next() {
		switch {
		case num == opField && typ == protowire.BytesType:
			if f, err = d.field(b); err != nil {
				return flow.Operand{}, err
			}
			hasField = true
		case num == opHeader && typ == protowire.VarintType:
			k = small(v, 255)
		case num == opOffset && typ == protowire.VarintType:
			ofs = small(v, 255)
		case num == opWidth && typ == protowire.VarintType:
			w = small(v, 255)
		}
	}
	switch {
	case r.err != nil:
		return flow.Operand{}, r.err
	case hasField:
		return flow.Reg(f), nil
	case k != 0:
		return flow.HeaderBits(flow.MatchKind(k), uint8(ofs), uint8(w)), nil
	}
	return flow.Operand{}, nil
}

func (d *decoder) natSpec(data []byte) (*flow.NAT, error) {
	r := reader{b: data}
	n := d.nat.alloc(d)
	for num, typ, v, b, ok := r.next(); ok; num, typ, v, b, ok = r.next() {
		if typ == protowire.BytesType {
			switch num {
			case natMinAddr:
				n.MinAddr, _ = netip.AddrFromSlice(b)
			case natMaxAddr:
				n.MaxAddr, _ = netip.AddrFromSlice(b)
			}
			continue
		}
		if typ != protowire.VarintType {
			continue
		}
		switch num {
		case natKind:
			n.Kind = flow.NATKind(small(v, 255))
		case natMinPort:
			n.MinPort = uint16(small(v, 0xffff))
		case natMaxPort:
			n.MaxPort = uint16(small(v, 0xffff))
		case natPersistent:
			n.Persistent = v != 0
		case natSelection:
			n.Selection = flow.NATSelection(small(v, 255))
		}
	}
	return n, r.err
}

func (d *decoder) conntrack(data []byte) (*flow.ActCT, error) {
	r := reader{b: data}
	c := d.ct.alloc(d)
	var label, labelMask []byte
	var err error
	for num, typ, v, b, ok := r.next(); ok; num, typ, v, b, ok = r.next() {
		if typ == protowire.BytesType {
			switch num {
			case ctResume:
				c.Resume, err = d.jump(b)
			case ctNAT:
				c.NAT, err = d.natSpec(b)
			case ctLabel:
				label = b
			case ctLabelMask:
				labelMask = b
			}
			if err != nil {
				return nil, err
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
		}
	}
	if len(labelMask) > 0 {
		c.Label, c.LabelMask = flow.Uint128From(label), flow.Uint128From(labelMask)
	}
	return c, r.err
}

func (d *decoder) jump(data []byte) (flow.Jump, error) {
	r := reader{b: data}
	var j flow.Jump
	for num, typ, v, b, ok := r.next(); ok; num, typ, v, b, ok = r.next() {
		switch {
		case num == jumpKind && typ == protowire.VarintType:
			j.Kind = flow.JumpKind(small(v, 255))
		case num == jumpStage && typ == protowire.VarintType:
			j.Stage = flow.Stage(small(v, 255))
		case num == jumpPipeline && typ == protowire.VarintType:
			j.Pipeline = flow.Pipeline(small(v, 255))
		case num == jumpTable && typ == protowire.BytesType:
			j.Table = d.name(b)
		}
	}
	return j, r.err
}

// learnSpec decodes a Learn message into a; the specs of a batch's learn
// actions share chunks.
func (d *decoder) learnSpec(a *flow.ActLearn, data []byte) error {
	n := 0
	for pre := (reader{b: data}); ; {
		num, typ, _, _, ok := pre.next()
		if !ok {
			break
		}
		if num == learnSpecs && typ == protowire.BytesType {
			n++
		}
	}
	if n > 0 {
		if cap(d.specs)-len(d.specs) < n {
			d.specs = make([]flow.LearnSpec, 0, max(n, 64))
		}
		start := len(d.specs)
		d.specs = d.specs[:start+n]
		a.Specs = d.specs[start : start : start+n]
	}
	r := reader{b: data}
	for num, typ, v, b, ok := r.next(); ok; num, typ, v, b, ok = r.next() {
		switch {
		case num == learnTable && typ == protowire.BytesType:
			a.Table = d.name(b)
		case num == learnPriority && typ == protowire.VarintType:
			a.Priority = uint16(small(v, 0xffff))
		case num == learnIdle && typ == protowire.VarintType:
			a.IdleTimeout = uint16(small(v, 0xffff))
		case num == learnHard && typ == protowire.VarintType:
			a.HardTimeout = uint16(small(v, 0xffff))
		case num == learnSpecs && typ == protowire.BytesType:
			sp, err := d.spec(b)
			if err != nil {
				return err
			}
			a.Specs = append(a.Specs, sp)
		}
	}
	return r.err
}

func (d *decoder) spec(data []byte) (flow.LearnSpec, error) {
	var sp flow.LearnSpec
	var err error
	r := reader{b: data}
	for num, typ, v, b, ok := r.next(); ok; num, typ, v, b, ok = r.next() {
		switch {
		case num == specKind && typ == protowire.VarintType:
			sp.Kind = flow.LearnKind(small(v, 255))
		case num == specDst && typ == protowire.BytesType:
			sp.Dst, err = d.operand(b)
		case num == specSrc && typ == protowire.BytesType:
			sp.Src, err = d.operand(b)
		case num == specValue && typ == protowire.VarintType:
			sp.Value = v
		}
		if err != nil {
			return sp, err
		}
	}
	return sp, r.err
}

// rawAction is an Action message's fields, read in one pass before the
// kind (which may come last) decides the type.
type rawAction struct {
	kind, port, setKind, uint, maxLen, reason uint64
	field, value, userdata, ct, moveFrom      []byte
	moveTo, mask, jump, learn                 []byte
	hasField                                  bool
}

// action decodes one Action message. An unknown kind decodes to nil, as
// fromproto does; Flow.Validate reports it.
func (d *decoder) action(data []byte) (flow.Action, error) {
	r := reader{b: data}
	var x rawAction
	for num, typ, v, b, ok := r.next(); ok; num, typ, v, b, ok = r.next() {
		if typ == protowire.VarintType {
			switch num {
			case actKind:
				x.kind = v
			case actPort:
				x.port = v
			case actSetKind:
				x.setKind = v
			case actUint:
				x.uint = v
			case actMaxLen:
				x.maxLen = v
			case actReason:
				x.reason = v
			}
			continue
		}
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case actField:
			x.field, x.hasField = b, true
		case actValue:
			x.value = b
		case actUserdata:
			x.userdata = b
		case actCT:
			x.ct = b
		case actMoveFrom:
			x.moveFrom = b
		case actMoveTo:
			x.moveTo = b
		case actMask:
			x.mask = b
		case actJump:
			x.jump = b
		case actLearn:
			x.learn = b
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	var err error
	field := func() flow.Field {
		var f flow.Field
		if x.hasField && err == nil {
			f, err = d.field(x.field)
		}
		return f
	}
	bytesOrNil := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		return carve(&d.arena, b)
	}
	switch pb.ActionKind(small(x.kind, 1<<31)) {
	case pb.ActionKind_ACTION_OUTPUT:
		a := d.output.alloc(d)
		a.Port = uint32(small(x.port, 0xffffffff))
		return a, nil
	case pb.ActionKind_ACTION_OUTPUT_FIELD:
		a := d.outputField.alloc(d)
		a.Field = field()
		return a, err
	case pb.ActionKind_ACTION_IN_PORT:
		return inPort, nil
	case pb.ActionKind_ACTION_NORMAL:
		return normal, nil
	case pb.ActionKind_ACTION_CONTROLLER:
		a := d.controller.alloc(d)
		a.MaxLen, a.Userdata = uint16(small(x.maxLen, 0xffff)), bytesOrNil(x.userdata)
		a.Reason, a.Meter = flow.ControllerReason(small(x.reason, 255)), uint32(small(x.uint, 0xffffffff))
		return a, nil
	case pb.ActionKind_ACTION_SET_FIELD:
		a := d.setField.alloc(d)
		a.Kind, a.Value, a.Mask = flow.MatchKind(small(x.setKind, 255)), bytesOrNil(x.value), bytesOrNil(x.mask)
		return a, nil
	case pb.ActionKind_ACTION_LOAD:
		a := d.load.alloc(d)
		a.Field, a.Value = field(), uint32(small(x.uint, 0xffffffff))
		return a, err
	case pb.ActionKind_ACTION_MOVE:
		a := d.move.alloc(d)
		if x.moveFrom != nil {
			if a.From, err = d.operand(x.moveFrom); err != nil {
				return nil, err
			}
		}
		if x.moveTo != nil {
			if a.To, err = d.operand(x.moveTo); err != nil {
				return nil, err
			}
		}
		return a, nil
	case pb.ActionKind_ACTION_CT:
		return d.conntrack(x.ct)
	case pb.ActionKind_ACTION_CT_CLEAR:
		return ctClear, nil
	case pb.ActionKind_ACTION_GROUP:
		a := d.group.alloc(d)
		a.ID = uint32(small(x.uint, 0xffffffff))
		return a, nil
	case pb.ActionKind_ACTION_METER:
		a := d.meter.alloc(d)
		a.ID = uint32(small(x.uint, 0xffffffff))
		return a, nil
	case pb.ActionKind_ACTION_DEC_TTL:
		return decTTL, nil
	case pb.ActionKind_ACTION_PUSH_VLAN:
		a := d.pushVLAN.alloc(d)
		a.TPID = uint16(small(x.uint, 0xffff))
		return a, nil
	case pb.ActionKind_ACTION_POP_VLAN:
		return popVLAN, nil
	case pb.ActionKind_ACTION_CONJUNCTION:
		a := d.conj.alloc(d)
		a.ID, a.Clause, a.NClauses = uint32(small(x.uint, 0xffffffff)), uint8(x.port>>8), uint8(x.port)
		return a, nil
	case pb.ActionKind_ACTION_RESUBMIT:
		a := d.resubmit.alloc(d)
		if x.jump != nil {
			a.To, err = d.jump(x.jump)
		}
		return a, err
	case pb.ActionKind_ACTION_NOTE:
		a := d.note.alloc(d)
		a.Data = bytesOrNil(x.value)
		return a, nil
	case pb.ActionKind_ACTION_LEARN:
		a := d.learn.alloc(d)
		if x.learn != nil {
			err = d.learnSpec(a, x.learn)
		}
		return a, err
	}
	return nil, nil
}

func (dc *decoder) matchField(data []byte) (flow.MatchField, error) {
	arena := &dc.arena
	r := reader{b: data}
	var m flow.MatchField
	var err error
	for num, typ, v, d, ok := r.next(); ok; num, typ, v, d, ok = r.next() {
		switch {
		case num == mfKind && typ == protowire.VarintType:
			m.Kind = flow.MatchKind(small(v, 255))
		case num == mfField && typ == protowire.BytesType:
			if m.Field, err = dc.field(d); err != nil {
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
	tagMask    uint32
	start, end int // match fields in the slab
	aStart     int // actions in the action slab
	aEnd       int
}

func (dc *decoder) decodeFlow(data []byte) (decodedFlow, error) {
	r := reader{b: data}
	out := decodedFlow{start: len(dc.fields), aStart: len(dc.actions)}
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
			case flowTagMask:
				out.tagMask = uint32(small(v, 0xffffffff))
			}
			continue
		}
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case flowTable:
			// Batches name few tables; reuse the previous flow's string.
			if string(d) == dc.lastTable {
				f.Table = dc.lastTable
			} else {
				f.Table = string(d)
				dc.lastTable = f.Table
			}
		case flowMatch:
			m, err := dc.matchField(d)
			if err != nil {
				return out, err
			}
			dc.fields = append(dc.fields, m)
		case flowActions:
			a, err := dc.action(d)
			if err != nil {
				return out, err
			}
			dc.actions = append(dc.actions, a)
		case flowGoto:
			j, err := dc.jump(d)
			if err != nil {
				return out, err
			}
			f.Goto = j
		}
	}
	out.end, out.aEnd = len(dc.fields), len(dc.actions)
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
	sl := &decoder{nflows: n, fields: make([]flow.MatchField, 0, 3*n), actions: make([]flow.Action, 0, 2*n), arena: make([]byte, 0, max(4096, len(data)/8))}
	for num, typ, _, d, ok := r.next(); ok; num, typ, _, d, ok = r.next() {
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case batchFlows:
			f, err := sl.decodeFlow(d)
			if err != nil {
				return nil, err
			}
			flows = append(flows, f)
			sl.flow++
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
		out.Ops = append(out.Ops, flow.Op{Kind: f.op, Flow: &f.f, TagMask: f.tagMask})
	}
	return out, nil
}

// AppendFlow appends f alone in its wire form (a serialized Flow message,
// without the operation): the compact form in which the host keeps the
// flows it installed. f must be valid (flow.Flow.Validate): the host keeps
// only flows it decoded from a plugin's batch and validated, whose every
// action encodes, so a failure here is a bug and panics.
func AppendFlow(b []byte, f *flow.Flow) []byte {
	var e encoder
	return mustFlow(e.appendFlow(b, f, 0, 0))
}

func mustFlow(b []byte, err error) []byte {
	if err != nil {
		panic("fastwire: encoding a validated flow: " + err.Error())
	}
	return b
}

// FlowEncoder is AppendFlow with scratch buffers kept between calls, for
// encoding many flows one after the other without allocating.
type FlowEncoder struct{ e encoder }

// Append is AppendFlow.
func (fe *FlowEncoder) Append(b []byte, f *flow.Flow) []byte {
	return mustFlow(fe.e.appendFlow(b, f, 0, 0))
}

// DecodeFlow reads one flow written by AppendFlow. The flow owns its
// memory: nothing refers back to data.
func DecodeFlow(data []byte) (*flow.Flow, error) {
	d := &decoder{nflows: 1}
	df, err := d.decodeFlow(data)
	if err != nil {
		return nil, err
	}
	f := &df.f
	f.Match = flow.MatchOf(d.fields[df.start:df.end:df.end]...)
	if df.aEnd > df.aStart {
		f.Actions = d.actions[df.aStart:df.aEnd:df.aEnd]
	}
	return f, nil
}
