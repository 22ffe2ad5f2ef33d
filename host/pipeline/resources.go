package pipeline

import (
	"fmt"
	"maps"
	"slices"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Shared resources besides tables and registers (ct zones, ct_mark bits,
// metadata bits) are handed out the same way: requested by name in
// Describe, granted concrete values, kept across restarts, publishable to
// every plugin, and checked in every flow.

// resourceBits is how many bits each bit-range kind has.
var resourceBits = map[sdk.ResourceKind]uint8{sdk.ResourceCTMark: 32, sdk.ResourceMetadata: 64}

// registerResources releases what p no longer requests (or requests with
// another kind or width) and grants the rest; names are unique on the node.
func (a *Arbiter) registerResources(p *Plugin, want []sdk.Resource) []error {
	var errs []error
	byName := map[string]sdk.Resource{}
	for _, r := range want {
		switch {
		case r.Name == "":
			errs = append(errs, fmt.Errorf("%w: a %s resource has no name", sdk.ErrInvalid, r.Kind))
			continue
		case r.Kind != sdk.ResourceCTZone && (r.Width == 0 || r.Width > resourceBits[r.Kind]):
			errs = append(errs, fmt.Errorf("%w: resource %q: %s width %d must be 1-%d", sdk.ErrInvalid, r.Name, r.Kind, r.Width, resourceBits[r.Kind]))
			continue
		}
		if _, dup := byName[r.Name]; dup {
			errs = append(errs, fmt.Errorf("%w: resource %q requested twice", sdk.ErrInvalid, r.Name))
			continue
		}
		for _, o := range a.plugins {
			if _, taken := o.Grants[r.Name]; taken && o.Name != p.Name {
				errs = append(errs, fmt.Errorf("%w: resource %q is already granted to plugin %q; pick another name", sdk.ErrConflict, r.Name, o.Name))
			}
		}
		byName[r.Name] = r
	}
	if p.Grants == nil {
		p.Grants = map[string]sdk.Grant{}
	}
	for n, g := range p.Grants {
		if r, ok := byName[n]; !ok || r.Kind != g.Kind || (r.Kind != sdk.ResourceCTZone && r.Width != g.Width) {
			delete(p.Grants, n)
		}
	}
	p.Published = nil
	for _, r := range want {
		if _, ok := byName[r.Name]; !ok {
			continue
		}
		if r.Exported {
			p.Published = append(p.Published, r.Name)
		}
		if _, have := p.Grants[r.Name]; have {
			continue
		}
		g, err := a.grant(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("resource %q: %w", r.Name, err))
			continue
		}
		g.Owner = p.Name
		p.Grants[r.Name] = g
	}
	return errs
}

// grant finds a free zone (1 up; zone 0 is the shared default) or the first
// free run of bits.
func (a *Arbiter) grant(r sdk.Resource) (sdk.Grant, error) {
	var zones = map[uint32]bool{}
	var used uint64
	for _, o := range a.plugins {
		for _, g := range o.Grants {
			if g.Kind == r.Kind {
				zones[g.Value] = true
				used |= g.Mask()
			}
		}
	}
	if r.Kind == sdk.ResourceCTZone {
		for z := uint32(1); z <= 0xffff; z++ {
			if !zones[z] {
				return sdk.Grant{Kind: r.Kind, Value: z}, nil
			}
		}
		return sdk.Grant{}, fmt.Errorf("%w: every ct zone is granted", sdk.ErrLimit)
	}
	total := resourceBits[r.Kind]
	for off := uint8(0); off+r.Width <= total; off++ {
		g := sdk.Grant{Kind: r.Kind, Offset: off, Width: r.Width}
		if used&g.Mask() == 0 {
			return g, nil
		}
	}
	return sdk.Grant{}, fmt.Errorf("%w: no %d free contiguous bits left in %s", sdk.ErrLimit, r.Width, r.Kind)
}

// grantsFor is every grant a plugin may use: its own and the published ones.
func (a *Arbiter) grantsFor(name string) map[string]sdk.Grant {
	out := map[string]sdk.Grant{}
	for _, o := range a.plugins {
		for n, g := range o.Grants {
			if o.Name == name || slices.Contains(o.Published, n) {
				out[n] = g
			}
		}
	}
	return out
}

// Grants lists every granted resource by name, for introspection.
func (a *Arbiter) Grants() map[string]sdk.Grant {
	out := map[string]sdk.Grant{}
	for _, o := range a.plugins {
		maps.Copy(out, o.Grants)
	}
	return out
}

// Published reports whether a granted resource is published.
func (a *Arbiter) Published(name string) bool {
	for _, o := range a.plugins {
		if slices.Contains(o.Published, name) {
			return true
		}
	}
	return false
}

// checkResources refuses a flow that uses a ct zone, ct_mark bits or
// metadata bits the plugin was not granted (nor were published to it).
func (a *Arbiter) checkResources(owner string, t *Table, f *flow.Flow) error {
	zones := map[uint32]bool{}
	masks := map[sdk.ResourceKind]uint64{}
	for _, g := range a.grantsFor(owner) {
		zones[g.Value] = zones[g.Value] || g.Kind == sdk.ResourceCTZone
		masks[g.Kind] |= g.Mask()
	}
	refuse := func(what string, kind sdk.ResourceKind) error {
		how := "Assignment.Grants[name].Value"
		if kind != sdk.ResourceCTZone {
			how = "only the bits of Assignment.Grants[name] (Offset, Width)"
		}
		return fmt.Errorf("%w: plugin %q: flow in table %q uses %s, which was not granted to it; request a %s resource in Describe (sdk.Resource) and use %s",
			sdk.ErrUnallocatedField, owner, t.Name, what, kind, how)
	}
	for _, m := range f.Match.Fields() {
		switch m.Kind {
		case flow.MatchCTZone:
			if z := uint32(m.Uint()); !zones[z] {
				return refuse(fmt.Sprintf("ct zone %d", z), sdk.ResourceCTZone)
			}
		case flow.MatchCTMark:
			if extra := m.MaskUint() & 0xffffffff &^ masks[sdk.ResourceCTMark]; extra != 0 {
				return refuse(fmt.Sprintf("ct_mark bits %#x", extra), sdk.ResourceCTMark)
			}
		case flow.MatchMetadata:
			if extra := m.MaskUint() &^ masks[sdk.ResourceMetadata]; extra != 0 {
				return refuse(fmt.Sprintf("metadata bits %#x", extra), sdk.ResourceMetadata)
			}
		}
	}
	for _, act := range f.Actions {
		ct, ok := act.(*flow.ActCT)
		if !ok {
			continue
		}
		if z := uint32(ct.Zone); z != 0 && !zones[z] {
			return refuse(fmt.Sprintf("ct zone %d", z), sdk.ResourceCTZone)
		}
		if extra := uint64(ct.MarkMask) &^ masks[sdk.ResourceCTMark]; extra != 0 {
			return refuse(fmt.Sprintf("ct_mark bits %#x", extra), sdk.ResourceCTMark)
		}
	}
	return nil
}
