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
}

// Arbiter holds the layout. It is not safe for concurrent use; the host
// serialises calls.
type Arbiter struct {
	tables  map[string]*Table
	byID    map[uint8]*Table
	plugins map[string]*Plugin
	regs    [16]uint32 // allocated bits per register
}

// New returns an empty layout with the well-known fields reserved.
func New() *Arbiter {
	a := &Arbiter{tables: map[string]*Table{}, byID: map[uint8]*Table{}, plugins: map[string]*Plugin{}}
	for _, b := range flow.WellKnownBits() {
		a.regs[b.Reg] |= b.Mask()
	}
	return a
}

func (a *Arbiter) clone() *Arbiter {
	c := &Arbiter{tables: map[string]*Table{}, byID: map[uint8]*Table{}, plugins: map[string]*Plugin{}, regs: a.regs}
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
		c.plugins[n] = &pp
	}
	return c
}

// Register assigns (or, for a plugin seen before, re-assigns) a plugin's
// tables, fields and cookie prefix, and starts a new round. Tables and
// fields the plugin had before keep their IDs and bits. Either everything
// is assigned or nothing changes, and the error lists every problem.
func (a *Arbiter) Register(name string, tables []sdk.Table, fields []flow.Field) (*Plugin, error) {
	c := a.clone()
	p, err := c.register(name, tables, fields)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: %w", name, err)
	}
	*a = *c
	out := *p
	return &out, nil
}

func (a *Arbiter) register(name string, tables []sdk.Table, fields []flow.Field) (*Plugin, error) {
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
		cur.Miss, cur.Exported = t.Miss, t.Exported // same stage: keep the ID
		return nil
	}
	for id := int(r.First); id <= int(r.Last); id++ {
		if _, used := a.byID[uint8(id)]; !used {
			nt := &Table{Name: t.Name, Owner: owner, Pipeline: t.Pipeline, Stage: t.Stage, ID: uint8(id), Miss: t.Miss, Exported: t.Exported}
			a.tables[t.Name] = nt
			a.byID[nt.ID] = nt
			return nil
		}
	}
	return fmt.Errorf("%w: table %q: stage %s/%s is full (table IDs %d-%d all assigned)", sdk.ErrLimit, t.Name, t.Pipeline, t.Stage, r.First, r.Last)
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
