package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// TableNone marks "no jump".
const TableNone uint8 = 0xff

// Resolved is a flow checked against the layout, with everything symbolic
// made concrete. Flow is the plugin's original, kept so the flow can be
// re-resolved when the layout changes (a hot-loaded table can become the
// "next table").
type Resolved struct {
	Owner   string
	Flow    *flow.Flow
	TableID uint8
	Cookie  uint64
	// Goto is the goto_table target, TableNone if the flow has none.
	Goto uint8
	// Jumps has one entry per action that carries a jump (flow.JumpOf), in
	// action order: a ct(table=) resume, a resubmit target, the table a
	// learn action writes into.
	Jumps []uint8
	// Fields maps every register field the flow uses to its bits.
	Fields map[string]flow.Bits
	// Prefix is the owner's cookie prefix (for group and meter IDs).
	Prefix uint16
	// Layout says the flow uses NextTable or GotoStage, so its targets
	// depend on which tables exist.
	Layout bool
	// Miss marks the table-miss flow the host installs for a table.
	Miss bool
}

// Key is the switch identity of a resolved flow: table ID, priority and the
// match with register fields resolved to bits.
type Key struct {
	Table    uint8
	Priority uint16
	Match    string
}

func (k Key) String() string {
	return fmt.Sprintf("table=%d, priority=%d, %s", k.Table, k.Priority, k.Match)
}

// Key returns the flow's switch identity.
func (r *Resolved) Key() Key {
	return Key{Table: r.TableID, Priority: r.Flow.Priority, Match: r.MatchString()}
}

// RegMatchString prints a register match resolved to bits, as ovs-ofctl does
// ("reg3=0x100/0xff00").
func RegMatchString(b flow.Bits, f flow.MatchField) string {
	v := uint32(f.Uint()) << b.Offset
	m := uint32(f.MaskUint()) << b.Offset & b.Mask()
	if m == 0xffffffff {
		return fmt.Sprintf("reg%d=%#x", b.Reg, v)
	}
	return fmt.Sprintf("reg%d=%#x/%#x", b.Reg, v, m)
}

// MatchString is the resolved match text, exactly as ovs-ofctl prints
// the switch's match: the plugin's register fields that share a register
// merge into one regN=value/mask, and registers print in number order,
// where ovs-ofctl prints them.
func (r *Resolved) MatchString() string {
	printed := false
	return r.Flow.Match.Format(func(f flow.MatchField) string {
		if f.Kind != flow.MatchRegField {
			return f.String()
		}
		if printed {
			return ""
		}
		printed = true
		return r.regsString()
	})
}

// regsString prints the match's register fields merged per register.
func (r *Resolved) regsString() string {
	var val, mask [16]uint32
	var used uint16
	for _, f := range r.Flow.Match.Fields() {
		if f.Kind != flow.MatchRegField {
			continue
		}
		b := r.Fields[f.Field.Name]
		val[b.Reg&15] |= uint32(f.Uint()) << b.Offset & b.Mask()
		mask[b.Reg&15] |= uint32(f.MaskUint()) << b.Offset & b.Mask()
		used |= 1 << (b.Reg & 15)
	}
	var parts []string
	for i := range 16 {
		if used&(1<<i) == 0 {
			continue
		}
		if mask[i] == 0xffffffff {
			parts = append(parts, fmt.Sprintf("reg%d=%#x", i, val[i]))
		} else {
			parts = append(parts, fmt.Sprintf("reg%d=%#x/%#x", i, val[i]&mask[i], mask[i]))
		}
	}
	return strings.Join(parts, ",")
}

// String is the canonical resolved text, what ovs-ofctl dump-flows prints
// for the flow (without the statistics):
//
//	cookie=0x1000100000000, table=0, priority=100,ip,in_port=3 actions=set_field:0x1/0xf->reg0,goto_table:30
func (r *Resolved) String() string {
	// Flow.Format prints the actions' jumps in action order, then the Goto.
	jumps := append(slices.Clip(r.Jumps), r.Goto)
	n := 0
	p := flow.Printer{
		Field: func(f flow.Field) string { return r.Fields[f.Name].String() },
		Jump: func(flow.Jump) string {
			id := jumps[min(n, len(jumps)-1)]
			n++
			return fmt.Sprint(id)
		},
		Bits: func(f flow.Field) (flow.Bits, bool) {
			b, ok := r.Fields[f.Name]
			return b, ok
		},
		Cookie:  LearnedCookie(r.Cookie),
		GroupID: func(id uint32) uint32 { return GroupID(r.Prefix, id) },
		MeterID: func(id uint32) uint32 { return MeterID(r.Prefix, id) },
	}
	var b strings.Builder
	// The header as ovs-ofctl --no-stats dump-flows prints it: table 0 and
	// zero timeouts are left out, and a flow with a timeout asks for
	// FLOW_REMOVED (ofxlate.Flow), which prints as send_flow_rem.
	if r.Cookie != 0 {
		fmt.Fprintf(&b, "cookie=%#x, ", r.Cookie)
	}
	if r.TableID != 0 {
		fmt.Fprintf(&b, "table=%d, ", r.TableID)
	}
	if r.Flow.IdleTimeout != 0 {
		fmt.Fprintf(&b, "idle_timeout=%d, ", r.Flow.IdleTimeout)
	}
	if r.Flow.HardTimeout != 0 {
		fmt.Fprintf(&b, "hard_timeout=%d, ", r.Flow.HardTimeout)
	}
	if r.Flow.IdleTimeout != 0 || r.Flow.HardTimeout != 0 {
		b.WriteString("send_flow_rem ")
	}
	match := r.MatchString()
	if r.Flow.Priority != 0x8000 {
		fmt.Fprintf(&b, "priority=%d", r.Flow.Priority)
		if match != "" {
			b.WriteByte(',')
		}
	}
	b.WriteString(match)
	if b.Len() > 0 && !strings.HasSuffix(b.String(), " ") {
		b.WriteByte(' ')
	}
	b.WriteString("actions=")
	b.WriteString(r.Flow.FormatActions(p))
	return b.String()
}

// Resolve checks one flow of a plugin and resolves it. Errors wrap the sdk
// sentinels and name the plugin, table, field or jump at fault.
func (a *Arbiter) Resolve(owner string, f *flow.Flow) (*Resolved, error) {
	p, ok := a.plugins[owner]
	if !ok {
		return nil, fmt.Errorf("%w: plugin %q is not registered", sdk.ErrInvalid, owner)
	}
	t, ok := a.tables[f.Table]
	if !ok {
		return nil, fmt.Errorf("%w: plugin %q: flow %s: no table named %q is declared", sdk.ErrUnknownTable, owner, f, f.Table)
	}
	if t.Owner != owner && !t.Exported {
		return nil, fmt.Errorf("%w: plugin %q may not write into table %q (ID %d): it is private to plugin %q", sdk.ErrNotOwner, owner, t.Name, t.ID, t.Owner)
	}
	if err := checkWellKnownWrites(owner, t, f); err != nil {
		return nil, err
	}
	if err := a.checkResources(owner, t, f); err != nil {
		return nil, err
	}
	r := &Resolved{Owner: owner, Flow: f, TableID: t.ID, Cookie: Cookie(p.Prefix, p.Round, f.Tag), Goto: TableNone, Prefix: p.Prefix}
	if err := a.resolveFields(p, r, f.Fields()); err != nil {
		return nil, err
	}
	for _, act := range f.Actions {
		j, ok := flow.JumpOf(act)
		if !ok {
			continue
		}
		var id uint8
		var err error
		switch act.(type) {
		case *flow.ActLearn:
			// A learned flow may go into any table the plugin may write,
			// earlier ones included: it is not a jump of this packet.
			id, err = a.WritableTable(owner, j)
		case *flow.ActResubmit:
			if id, err = a.resolveJump(owner, t, j, r); err == nil {
				err = a.checkWritable(owner, id, "resubmit")
			}
		default:
			id, err = a.resolveJump(owner, t, j, r)
		}
		if err != nil {
			return nil, err
		}
		r.Jumps = append(r.Jumps, id)
	}
	if f.Goto.Kind != flow.JumpNone {
		id, err := a.resolveJump(owner, t, f.Goto, r)
		if err != nil {
			return nil, err
		}
		r.Goto = id
	}
	return r, nil
}

// WritableTable resolves a table named by a GotoTable jump that a plugin
// writes into (the table of a learned flow, a group bucket's resubmit):
// it must be the plugin's own table or an exported one.
func (a *Arbiter) WritableTable(owner string, j flow.Jump) (uint8, error) {
	if j.Kind != flow.JumpTable {
		return 0, fmt.Errorf("%w: plugin %q: %s: only a table named with GotoTable can be used here", sdk.ErrInvalid, owner, j)
	}
	t, ok := a.tables[j.Table]
	if !ok {
		return 0, fmt.Errorf("%w: plugin %q: no table named %q is declared", sdk.ErrUnknownTable, owner, j.Table)
	}
	return t.ID, a.checkWritable(owner, t.ID, "table")
}

func (a *Arbiter) checkWritable(owner string, id uint8, what string) error {
	for _, t := range a.tables {
		if t.ID == id && t.Owner != owner && !t.Exported {
			return fmt.Errorf("%w: plugin %q: %s target %q (ID %d) is private to plugin %q", sdk.ErrNotOwner, owner, what, t.Name, t.ID, t.Owner)
		}
	}
	return nil
}

// wellKnownWriters says in which stage each well-known field may be
// written: where a packet came from is decided by the classifier, where it
// goes by the switching stage. Any table may read them. Without this rule
// any plugin could redirect any packet anywhere.
var wellKnownWriters = map[string]flow.Stage{
	flow.FieldPacketSource.Name: flow.StageClassifier,
	flow.FieldTargetPort.Name:   flow.StageSwitching,
	flow.FieldOutputReady.Name:  flow.StageSwitching,
}

func checkWellKnownWrites(owner string, t *Table, f *flow.Flow) error {
	for _, act := range f.Actions {
		var dst flow.Field
		switch x := act.(type) {
		case *flow.ActLoad:
			dst = x.Field
		case *flow.ActMove:
			dst, _ = x.To.Reg()
		default:
			continue
		}
		stage, ok := wellKnownWriters[dst.Name]
		if !ok || t.Stage == stage {
			continue
		}
		return fmt.Errorf("%w: plugin %q: flow in table %q (stage %s) writes well-known field %q, which only tables of stage %s may write; write it from a %s table (your own or an exported one), or jump to one",
			sdk.ErrNotOwner, owner, t.Name, t.Stage, dst.Name, stage, stage)
	}
	return nil
}

func (a *Arbiter) resolveFields(p *Plugin, r *Resolved, used []flow.Field) error {
	if len(used) == 0 {
		return nil
	}
	wk := wellKnown
	r.Fields = make(map[string]flow.Bits, len(used))
	for _, f := range used {
		if b, ok := wk[f.Name]; ok {
			if b.Width != f.Width {
				return fmt.Errorf("%w: plugin %q: well-known field %q is %d bits, used as %d", sdk.ErrUnallocatedField, p.Name, f.Name, b.Width, f.Width)
			}
			r.Fields[f.Name] = b
			continue
		}
		b, ok := p.Bits[f.Name]
		if !ok {
			return fmt.Errorf("%w: plugin %q: flow in table %q uses register field %q, which the plugin did not request in Describe", sdk.ErrUnallocatedField, p.Name, r.Flow.Table, f.Name)
		}
		if b.Width != f.Width {
			return fmt.Errorf("%w: plugin %q: register field %q was requested with %d bits but is used with %d", sdk.ErrUnallocatedField, p.Name, f.Name, b.Width, f.Width)
		}
		r.Fields[f.Name] = b
	}
	return nil
}

var wellKnown = flow.WellKnownBits()

func (a *Arbiter) resolveJump(owner string, from *Table, j flow.Jump, r *Resolved) (uint8, error) {
	var target *Table
	switch j.Kind {
	case flow.JumpNext:
		r.Layout = true
		target = a.nextTable(from)
		if target == nil {
			return 0, fmt.Errorf("%w: plugin %q: flow in table %q (ID %d) jumps to the next table, but it is the last table of pipeline %s", sdk.ErrUnknownTable, owner, from.Name, from.ID, from.Pipeline)
		}
	case flow.JumpStage, flow.JumpStageIn:
		r.Layout = true
		pl := from.Pipeline
		if j.Kind == flow.JumpStageIn {
			pl = j.Pipeline
		}
		target = a.firstAtOrAfter(pl, j.Stage)
		if target == nil {
			return 0, fmt.Errorf("%w: plugin %q: flow in table %q jumps to stage %s/%s, but no table is declared at or after it", sdk.ErrUnknownTable, owner, from.Name, pl, j.Stage)
		}
	case flow.JumpTable:
		t, ok := a.tables[j.Table]
		if !ok {
			return 0, fmt.Errorf("%w: plugin %q: flow in table %q jumps to table %q, which is not declared", sdk.ErrUnknownTable, owner, from.Name, j.Table)
		}
		target = t
	default:
		return 0, fmt.Errorf("%w: plugin %q: unknown jump kind %d", sdk.ErrInvalid, owner, j.Kind)
	}
	if target.ID <= from.ID {
		return 0, fmt.Errorf("%w: plugin %q: flow in table %q (ID %d) jumps %s to table %q (ID %d); goto_table only moves forward",
			sdk.ErrBackwardJump, owner, from.Name, from.ID, j, target.Name, target.ID)
	}
	return target.ID, nil
}

// nextTable is the assigned table after t in t's pipeline.
func (a *Arbiter) nextTable(t *Table) *Table {
	var best *Table
	for _, c := range a.tables {
		if c.Pipeline == t.Pipeline && c.ID > t.ID && (best == nil || c.ID < best.ID) {
			best = c
		}
	}
	return best
}

// firstAtOrAfter is the lowest-ID table of pipeline p in stage s or later.
func (a *Arbiter) firstAtOrAfter(p flow.Pipeline, s flow.Stage) *Table {
	var best *Table
	for _, c := range a.tables {
		if c.Pipeline == p && c.Stage >= s && (best == nil || c.ID < best.ID) {
			best = c
		}
	}
	return best
}

// MissFlow returns the table-miss flow the host installs for a table, or
// nil for MissDrop (the OpenFlow default needs no flow). It is owned by the
// table's owner and carries its cookie.
func (a *Arbiter) MissFlow(table string) (*Resolved, error) {
	t, ok := a.tables[table]
	if !ok {
		return nil, fmt.Errorf("%w: no table named %q", sdk.ErrUnknownTable, table)
	}
	f := &flow.Flow{Table: table, Priority: 0}
	switch t.Miss {
	case sdk.MissDrop:
		return nil, nil
	case sdk.MissNext:
		if a.nextTable(t) == nil {
			return nil, nil // last table: a miss drops
		}
		f.Goto = flow.NextTable()
	case sdk.MissController:
		f.Actions = []flow.Action{flow.Controller(0xffff, nil)}
	}
	r, err := a.Resolve(t.Owner, f)
	if r != nil {
		r.Miss = true
	}
	return r, err
}
