package pipeline

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// MaxPlugins bounds the cookie prefixes (and thus the group/meter ID shares).
const MaxPlugins = 255

// Table is a declared table with its assigned ID.
type Table struct {
	Name     string
	Owner    string
	Pipeline flow.Pipeline
	Stage    flow.Stage
	ID       uint8
	Miss     sdk.MissAction
	Exported bool
	// After and Before are the declared order constraints inside the
	// stage (table names); kept so tables loaded later honour them too.
	After  []string `json:"after,omitempty"`
	Before []string `json:"before,omitempty"`
}

// Plugin is one plugin's registration.
type Plugin struct {
	Name   string
	Prefix uint16
	Round  uint16
	// Tables are the names of the tables the plugin owns, in declaration order.
	Tables []string
	// Fields are the plugin's own register fields.
	Fields map[string]flow.Field
	Bits   map[string]flow.Bits
	// Unswept are earlier rounds whose flows may still be on the switch;
	// they are deleted (by cookie) when the plugin says it is synced.
	Unswept []uint16
	// Grants are the shared resources granted to the plugin, by name;
	// Published names those it published to every plugin.
	Grants    map[string]sdk.Grant
	Published []string
}

// Arbiter holds the layout. It is not safe for concurrent use; the host
// serialises calls.
type Arbiter struct {
	tables  map[string]*Table
	byID    map[uint8]*Table
	plugins map[string]*Plugin
	regs    [16]uint32 // allocated bits per register
	// ports is shared by every clone: who owns a port does not depend on
	// the layout.
	ports *portBook
}

// New returns an empty layout with the well-known fields reserved.
func New() *Arbiter {
	a := &Arbiter{tables: map[string]*Table{}, byID: map[uint8]*Table{}, plugins: map[string]*Plugin{}, ports: &portBook{byNo: map[uint32]PortGrant{}}}
	for _, b := range flow.WellKnownBits() {
		a.regs[b.Reg] |= b.Mask()
	}
	return a
}

func (a *Arbiter) clone() *Arbiter {
	c := &Arbiter{tables: map[string]*Table{}, byID: map[uint8]*Table{}, plugins: map[string]*Plugin{}, regs: a.regs, ports: a.ports}
	for n, t := range a.tables {
		tt := *t
		c.tables[n] = &tt
		c.byID[tt.ID] = &tt
	}
	for n, p := range a.plugins {
		pp := *p
		pp.Tables = slices.Clone(p.Tables)
		pp.Fields = maps.Clone(p.Fields)
		pp.Bits = maps.Clone(p.Bits)
		pp.Unswept = slices.Clone(p.Unswept)
		pp.Grants = maps.Clone(p.Grants)
		pp.Published = slices.Clone(p.Published)
		c.plugins[n] = &pp
	}
	return c
}

// Register assigns (or, for a plugin seen before, re-assigns) a plugin's
// tables, fields and cookie prefix, and starts a new round. Tables and
// fields the plugin had before keep their IDs and bits. Either everything
// is assigned or nothing changes, and the error lists every problem.
func (a *Arbiter) Register(name string, tables []sdk.Table, fields []flow.Field, resources ...sdk.Resource) (*Plugin, error) {
	c := a.clone()
	p, err := c.register(name, tables, fields, resources)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: %w", name, err)
	}
	*a = *c
	out := *p
	return &out, nil
}

func (a *Arbiter) register(name string, tables []sdk.Table, fields []flow.Field, resources []sdk.Resource) (*Plugin, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: plugin has no name", sdk.ErrInvalid)
	}
	p, ok := a.plugins[name]
	if !ok {
		prefix, err := a.freePrefix()
		if err != nil {
			return nil, err
		}
		p = &Plugin{Name: name, Prefix: prefix, Fields: map[string]flow.Field{}, Bits: map[string]flow.Bits{}}
		a.plugins[name] = p
	}
	if p.Round != 0 && !slices.Contains(p.Unswept, p.Round) {
		p.Unswept = append(p.Unswept, p.Round)
	}
	p.Round++
	// 0 never appears in a cookie, so a fresh switch has no "current"
	// flows by accident; LearnedRound is reserved for learned flows.
	if p.Round == 0 || p.Round == LearnedRound {
		p.Round = 1
	}
	var errs []error

	// Tables: release the ones no longer declared (or moved), then assign.
	declared := map[string]sdk.Table{}
	for _, t := range tables {
		if _, dup := declared[t.Name]; dup {
			errs = append(errs, fmt.Errorf("%w: table %q declared twice", sdk.ErrInvalid, t.Name))
			continue
		}
		declared[t.Name] = t
	}
	for _, n := range p.Tables {
		old := a.tables[n]
		if t, still := declared[n]; !still || t.Pipeline != old.Pipeline || t.Stage != old.Stage {
			delete(a.byID, old.ID)
			delete(a.tables, n)
		}
	}
	p.Tables = nil
	for _, t := range tables {
		if err := a.assignTable(name, t); err != nil {
			errs = append(errs, err)
			continue
		}
		if !slices.Contains(p.Tables, t.Name) {
			p.Tables = append(p.Tables, t.Name)
		}
	}

	// Fields: keep same-width allocations, release the rest, then allocate.
	want := map[string]flow.Field{}
	for _, f := range fields {
		if err := f.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: %v", sdk.ErrInvalid, err))
			continue
		}
		if strings.HasPrefix(f.Name, "sdk.") {
			errs = append(errs, fmt.Errorf("%w: register field %q: the sdk. prefix is reserved for well-known fields", sdk.ErrInvalid, f.Name))
			continue
		}
		if _, dup := want[f.Name]; dup {
			errs = append(errs, fmt.Errorf("%w: register field %q requested twice", sdk.ErrInvalid, f.Name))
			continue
		}
		want[f.Name] = f
	}
	for n, old := range p.Fields {
		if f, ok := want[n]; !ok || f.Width != old.Width {
			b := p.Bits[n]
			a.regs[b.Reg] &^= b.Mask()
			delete(p.Fields, n)
			delete(p.Bits, n)
		}
	}
	for _, f := range fields {
		if _, ok := want[f.Name]; !ok {
			continue
		}
		if _, have := p.Fields[f.Name]; have {
			continue
		}
		b, err := a.allocBits(f.Width)
		if err != nil {
			errs = append(errs, fmt.Errorf("register field %q (%d bits): %w", f.Name, f.Width, err))
			continue
		}
		p.Fields[f.Name] = f
		p.Bits[f.Name] = b
	}
	errs = append(errs, a.registerResources(p, resources)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

func (a *Arbiter) freePrefix() (uint16, error) {
	used := map[uint16]bool{}
	for _, p := range a.plugins {
		used[p.Prefix] = true
	}
	for i := uint16(1); i <= MaxPlugins; i++ {
		if !used[i] {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: all %d plugin slots are in use", sdk.ErrLimit, MaxPlugins)
}

func (a *Arbiter) assignTable(owner string, t sdk.Table) error {
	if t.Name == "" {
		return fmt.Errorf("%w: a table has an empty name", sdk.ErrInvalid)
	}
	if !t.Pipeline.Valid() {
		return fmt.Errorf("%w: table %q: unknown pipeline %d", sdk.ErrInvalid, t.Name, t.Pipeline)
	}
	r, ok := rangeOf(t.Pipeline, t.Stage)
	if !ok {
		return fmt.Errorf("%w: table %q: pipeline %s has no stage %s (it has %v)", sdk.ErrInvalid, t.Name, t.Pipeline, t.Stage, stagesOf(t.Pipeline))
	}
	if cur, ok := a.tables[t.Name]; ok {
		if cur.Owner != owner {
			return fmt.Errorf("%w: table %q is already declared by plugin %q", sdk.ErrConflict, t.Name, cur.Owner)
		}
		// Same stage: keep the ID.
		cur.Miss, cur.Exported, cur.After, cur.Before = t.Miss, t.Exported, slices.Clone(t.After), slices.Clone(t.Before)
		return nil
	}
	lo, hi, err := a.orderBounds(t, r)
	if err != nil {
		return err
	}
	for id := int(lo.id); id <= int(hi.id); id++ {
		if _, used := a.byID[uint8(id)]; !used {
			nt := &Table{Name: t.Name, Owner: owner, Pipeline: t.Pipeline, Stage: t.Stage, ID: uint8(id), Miss: t.Miss, Exported: t.Exported,
				After: slices.Clone(t.After), Before: slices.Clone(t.Before)}
			a.tables[t.Name] = nt
			a.byID[nt.ID] = nt
			return nil
		}
	}
	if lo.by != "" || hi.by != "" {
		return fmt.Errorf("%w: table %q must come %s in stage %s/%s, but no free table ID lies there (IDs %d-%d); relax the order or unload a table",
			sdk.ErrConflict, t.Name, orderText(lo, hi), t.Pipeline, t.Stage, lo.id, hi.id)
	}
	return fmt.Errorf("%w: table %q: stage %s/%s is full (table IDs %d-%d all assigned)", sdk.ErrLimit, t.Name, t.Pipeline, t.Stage, r.First, r.Last)
}

// bound is one end of the IDs a table may take, and the table that set it.
type bound struct {
	id uint8
	by string // the table that set it, "" for the stage's own end
}

// orderBounds is the ID range t may take inside its stage r: after every
// table it must follow, before every table it must precede, counting the
// constraints declared by t and those earlier tables declared about t. A
// named table of another stage is refused; one not loaded yet binds when
// it loads.
func (a *Arbiter) orderBounds(t sdk.Table, r Range) (lo, hi bound, err error) {
	lo, hi = bound{id: r.First}, bound{id: r.Last}
	for _, n := range slices.Concat(t.After, t.Before) {
		if x, ok := a.tables[n]; ok && (x.Pipeline != t.Pipeline || x.Stage != t.Stage) {
			return lo, hi, fmt.Errorf("%w: table %q (%s/%s) declares an order against table %q of plugin %q, which is in %s/%s; order binds tables of one stage only",
				sdk.ErrInvalid, t.Name, t.Pipeline, t.Stage, n, x.Owner, x.Pipeline, x.Stage)
		}
	}
	for _, x := range a.tables {
		if x.Pipeline != t.Pipeline || x.Stage != t.Stage {
			continue
		}
		after := slices.Contains(t.After, x.Name) || slices.Contains(x.Before, t.Name)
		before := slices.Contains(t.Before, x.Name) || slices.Contains(x.After, t.Name)
		if after && before {
			return lo, hi, fmt.Errorf("%w: table %q must come both before and after table %q (plugin %q)", sdk.ErrConflict, t.Name, x.Name, x.Owner)
		}
		if after && x.ID+1 > lo.id {
			lo = bound{id: x.ID + 1, by: x.Name}
		}
		if before {
			if x.ID == r.First {
				return lo, hi, fmt.Errorf("%w: table %q must come before table %q (plugin %q), which holds ID %d, the first of stage %s/%s; no ID is left before it",
					sdk.ErrConflict, t.Name, x.Name, x.Owner, x.ID, t.Pipeline, t.Stage)
			}
			if x.ID-1 < hi.id {
				hi = bound{id: x.ID - 1, by: x.Name}
			}
		}
	}
	// A table named in an order that has not loaded yet gets its place
	// kept: one free ID below t for each table t must follow, one above
	// for each it must precede. Without it, t would take the stage's first
	// free ID and a table that must come before it could never load (IDs
	// do not move once flows use them).
	for _, n := range t.After {
		if _, loaded := a.tables[n]; !loaded && lo.id < hi.id {
			lo.id++
		}
	}
	for _, n := range t.Before {
		if _, loaded := a.tables[n]; !loaded && hi.id > lo.id {
			hi.id--
		}
	}
	if lo.id > hi.id {
		return lo, hi, fmt.Errorf("%w: table %q must come %s, which contradict each other", sdk.ErrConflict, t.Name, orderText(lo, hi))
	}
	return lo, hi, nil
}

func orderText(lo, hi bound) string {
	switch {
	case lo.by != "" && hi.by != "":
		return fmt.Sprintf("after table %q (ID %d) and before table %q (ID %d)", lo.by, lo.id-1, hi.by, hi.id+1)
	case lo.by != "":
		return fmt.Sprintf("after table %q (ID %d)", lo.by, lo.id-1)
	default:
		return fmt.Sprintf("before table %q (ID %d)", hi.by, hi.id+1)
	}
}

// allocBits finds the first run of width free bits inside one register
// (first fit, reg0 upward); a field never spans two registers.
func (a *Arbiter) allocBits(width uint8) (flow.Bits, error) {
	for reg := uint8(0); reg < 16; reg++ {
		for off := 0; off+int(width) <= 32; off++ {
			b := flow.Bits{Reg: reg, Offset: uint8(off), Width: width}
			if a.regs[reg]&b.Mask() == 0 {
				a.regs[reg] |= b.Mask()
				return b, nil
			}
		}
	}
	return flow.Bits{}, fmt.Errorf("%w: no %d free contiguous bits left in reg0-reg15", sdk.ErrLimit, width)
}

// Swept records that the plugin's earlier rounds are gone from the switch.
func (a *Arbiter) Swept(name string) {
	if p, ok := a.plugins[name]; ok {
		p.Unswept = nil
	}
}

// Unregister removes a plugin with its tables and fields. It returns the
// tables it owned, so the host can clear them on the switch.
func (a *Arbiter) Unregister(name string) []Table {
	p, ok := a.plugins[name]
	if !ok {
		return nil
	}
	var removed []Table
	for _, n := range p.Tables {
		t := a.tables[n]
		removed = append(removed, *t)
		delete(a.byID, t.ID)
		delete(a.tables, n)
	}
	for _, b := range p.Bits {
		a.regs[b.Reg] &^= b.Mask()
	}
	delete(a.plugins, name)
	return removed
}

// Plugin returns a copy of a plugin's registration.
func (a *Arbiter) Plugin(name string) (Plugin, bool) {
	p, ok := a.plugins[name]
	if !ok {
		return Plugin{}, false
	}
	return *p, true
}

// PluginNames lists registered plugins, sorted.
func (a *Arbiter) PluginNames() []string {
	return slices.Sorted(maps.Keys(a.plugins))
}

// Table returns a table by name.
func (a *Arbiter) Table(name string) (Table, bool) {
	t, ok := a.tables[name]
	if !ok {
		return Table{}, false
	}
	return *t, true
}

// TableByID returns the table with an ID.
func (a *Arbiter) TableByID(id uint8) (Table, bool) {
	t, ok := a.byID[id]
	if !ok {
		return Table{}, false
	}
	return *t, true
}

// Layout lists every table, by ID.
func (a *Arbiter) Layout() []Table {
	out := make([]Table, 0, len(a.tables))
	for _, t := range a.tables {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Assignment is the sdk.Assignment for a plugin: its tables, every exported
// table, its fields plus the well-known ones.
func (a *Arbiter) Assignment(name string) (sdk.Assignment, bool) {
	p, ok := a.plugins[name]
	if !ok {
		return sdk.Assignment{}, false
	}
	out := sdk.Assignment{Tables: map[string]uint8{}, Fields: flow.WellKnownBits(), CookiePrefix: p.Prefix, Round: p.Round}
	for _, t := range a.tables {
		if t.Owner == name || t.Exported {
			out.Tables[t.Name] = t.ID
		}
	}
	maps.Copy(out.Fields, p.Bits)
	if g := a.grantsFor(name); len(g) > 0 {
		out.Grants = g
	}
	return out, true
}

// PluginByPrefix finds the plugin with a cookie prefix.
func (a *Arbiter) PluginByPrefix(prefix uint16) (string, bool) {
	for n, p := range a.plugins {
		if p.Prefix == prefix {
			return n, true
		}
	}
	return "", false
}
