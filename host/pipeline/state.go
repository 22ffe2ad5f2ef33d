package pipeline

import (
	"fmt"
	"maps"
	"slices"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// State is the layout as the host persists it in its run directory, so a
// restarted host gives every plugin the same table IDs, register bits and
// cookie prefix: the flows still on the switch stay meaningful and are
// re-owned by the plugin's next round.
type State struct {
	Plugins []PluginState `json:"plugins"`
}

// PluginState is one plugin's persisted registration.
type PluginState struct {
	Name   string                `json:"name"`
	Prefix uint16                `json:"prefix"`
	Round  uint16                `json:"round"`
	Tables []Table               `json:"tables"`
	Fields map[string]flow.Field `json:"fields,omitempty"`
	Bits   map[string]flow.Bits  `json:"bits,omitempty"`
	// Unswept are rounds that may still have flows on the switch.
	Unswept []uint16 `json:"unswept,omitempty"`
	// Grants are its shared resources; Published those it published.
	Grants    map[string]sdk.Grant `json:"grants,omitempty"`
	Published []string             `json:"published,omitempty"`
}

// Snapshot returns the current state.
func (a *Arbiter) Snapshot() State {
	var s State
	for _, n := range a.PluginNames() {
		p := a.plugins[n]
		ps := PluginState{Name: n, Prefix: p.Prefix, Round: p.Round, Fields: maps.Clone(p.Fields), Bits: maps.Clone(p.Bits), Unswept: slices.Clone(p.Unswept),
			Grants: maps.Clone(p.Grants), Published: slices.Clone(p.Published)}
		for _, tn := range p.Tables {
			ps.Tables = append(ps.Tables, *a.tables[tn])
		}
		s.Plugins = append(s.Plugins, ps)
	}
	return s
}

// Restore rebuilds an Arbiter from a snapshot, checking it is consistent
// (a hand-edited or corrupted state file is refused, not trusted).
func Restore(s State) (*Arbiter, error) {
	a := New()
	prefixes := map[uint16]string{}
	for _, ps := range s.Plugins {
		if ps.Name == "" || a.plugins[ps.Name] != nil {
			return nil, fmt.Errorf("state: plugin name %q empty or duplicated", ps.Name)
		}
		if ps.Prefix == 0 || ps.Prefix > MaxPlugins {
			return nil, fmt.Errorf("state: plugin %q: cookie prefix %d out of range 1..%d", ps.Name, ps.Prefix, MaxPlugins)
		}
		if other, dup := prefixes[ps.Prefix]; dup {
			return nil, fmt.Errorf("state: plugins %q and %q share cookie prefix %d", other, ps.Name, ps.Prefix)
		}
		prefixes[ps.Prefix] = ps.Name
		p := &Plugin{Name: ps.Name, Prefix: ps.Prefix, Round: ps.Round, Fields: map[string]flow.Field{}, Bits: map[string]flow.Bits{}, Unswept: slices.Clone(ps.Unswept)}
		for _, t := range ps.Tables {
			r, ok := rangeOf(t.Pipeline, t.Stage)
			if !ok || t.ID < r.First || t.ID > r.Last {
				return nil, fmt.Errorf("state: plugin %q: table %q ID %d is outside stage %s/%s", ps.Name, t.Name, t.ID, t.Pipeline, t.Stage)
			}
			if a.tables[t.Name] != nil || a.byID[t.ID] != nil {
				return nil, fmt.Errorf("state: plugin %q: table %q (ID %d) collides with another table", ps.Name, t.Name, t.ID)
			}
			tt := t
			tt.Owner = ps.Name
			a.tables[t.Name] = &tt
			a.byID[t.ID] = &tt
			p.Tables = append(p.Tables, t.Name)
		}
		for _, n := range slices.Sorted(maps.Keys(ps.Fields)) {
			b, ok := ps.Bits[n]
			if !ok || b.Width != ps.Fields[n].Width || b.Reg > 15 || int(b.Offset)+int(b.Width) > 32 {
				return nil, fmt.Errorf("state: plugin %q: field %q has bad bits %v", ps.Name, n, b)
			}
			if a.regs[b.Reg]&b.Mask() != 0 {
				return nil, fmt.Errorf("state: plugin %q: field %q bits %v overlap another field", ps.Name, n, b)
			}
			a.regs[b.Reg] |= b.Mask()
			p.Fields[n] = ps.Fields[n]
			p.Bits[n] = b
		}
		for n, g := range ps.Grants {
			if g.Owner != ps.Name {
				return nil, fmt.Errorf("state: plugin %q: resource %q names owner %q", ps.Name, n, g.Owner)
			}
			for _, o := range a.plugins {
				for on, og := range o.Grants {
					if on == n || (og.Kind == g.Kind && (overlaps(og, g) || (g.Kind == sdk.ResourceCTZone && og.Value == g.Value))) {
						return nil, fmt.Errorf("state: plugin %q: resource %q collides with %q of plugin %q", ps.Name, n, on, o.Name)
					}
				}
			}
		}
		p.Grants, p.Published = maps.Clone(ps.Grants), slices.Clone(ps.Published)
		a.plugins[ps.Name] = p
	}
	return a, nil
}
