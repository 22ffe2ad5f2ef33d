package pipeline

import (
	"fmt"
	"maps"
	"slices"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Shared resources besides tables and registers (ct zones, bits of
// ct_mark, ct_label, metadata and pkt_mark, and output to ports) are
// handed out the same way: requested by name in
// Describe, granted concrete values, kept across restarts, publishable to
// every plugin, and checked in every flow.

// resourceBits is how many bits each bit-range kind has.
var resourceBits = map[sdk.ResourceKind]uint8{sdk.ResourceCTMark: 32, sdk.ResourceMetadata: 64, sdk.ResourcePktMark: 32, sdk.ResourceCTLabel: 128}

// maxGrantWidth is the widest single grant: a Grant's bits fit a uint64.
const maxGrantWidth = 64

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
		case r.Kind == 0 || r.Kind > sdk.ResourceMaxKind:
			errs = append(errs, fmt.Errorf("%w: resource %q: unknown kind %d", sdk.ErrInvalid, r.Name, r.Kind))
			continue
		case r.Kind != sdk.ResourceCTZone && (r.Width == 0 || r.Width > min(resourceBits[r.Kind], maxGrantWidth)):
			errs = append(errs, fmt.Errorf("%w: resource %q: %s width %d must be 1-%d", sdk.ErrInvalid, r.Name, r.Kind, r.Width, min(resourceBits[r.Kind], maxGrantWidth)))
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
	var used flow.Uint128
	for _, o := range a.plugins {
		for _, g := range o.Grants {
			if g.Kind == r.Kind {
				zones[g.Value] = true
				m := g.Mask128()
				used.Hi, used.Lo = used.Hi|m.Hi, used.Lo|m.Lo
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
		if m := g.Mask128(); used.Hi&m.Hi == 0 && used.Lo&m.Lo == 0 { // free
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

// grantView is what one plugin may use: its zones and, per bit-range
// kind, the union of its granted bits.
type grantView struct {
	owner string
	zones map[uint32]bool
	masks map[sdk.ResourceKind]flow.Uint128
}

func (a *Arbiter) grantView(owner string) grantView {
	v := grantView{owner: owner, zones: map[uint32]bool{}, masks: map[sdk.ResourceKind]flow.Uint128{}}
	for _, g := range a.grantsFor(owner) {
		if g.Kind == sdk.ResourceCTZone {
			v.zones[g.Value] = true
			continue
		}
		m, b := g.Mask128(), v.masks[g.Kind]
		v.masks[g.Kind] = flow.Uint128{Hi: b.Hi | m.Hi, Lo: b.Lo | m.Lo}
	}
	return v
}

func (v grantView) refuse(where, what string, kind sdk.ResourceKind) error {
	how := "Assignment.Grants[name].Value"
	if kind != sdk.ResourceCTZone {
		how = "only the bits of Assignment.Grants[name] (Offset, Width)"
	}
	return fmt.Errorf("%w: plugin %q: %s uses %s, which was not granted to it; request a %s resource in Describe (sdk.Resource) and use %s",
		sdk.ErrUnallocatedField, v.owner, where, what, kind, how)
}

// zone refuses a ct zone other than the shared zone 0 that was not granted.
func (v grantView) zone(where string, z uint32) error {
	if z != 0 && !v.zones[z] {
		return v.refuse(where, fmt.Sprintf("ct zone %d", z), sdk.ResourceCTZone)
	}
	return nil
}

// bits128 refuses bits of kind's field outside the grants.
func (v grantView) bits128(where string, kind sdk.ResourceKind, used flow.Uint128) error {
	g := v.masks[kind]
	extra := flow.Uint128{Hi: used.Hi &^ g.Hi, Lo: used.Lo &^ g.Lo}
	if extra.IsZero() {
		return nil
	}
	what := fmt.Sprintf("%s bits %#x", kind, extra.Lo)
	if extra.Hi != 0 {
		what = fmt.Sprintf("%s bits %#x%016x", kind, extra.Hi, extra.Lo)
	}
	return v.refuse(where, what, kind)
}

func (v grantView) bits(where string, kind sdk.ResourceKind, used uint64) error {
	return v.bits128(where, kind, flow.Uint128{Lo: used})
}

// headerKinds maps the header fields that are shared resources to their
// resource kind.
var headerKinds = map[flow.MatchKind]sdk.ResourceKind{
	flow.MatchCTMark:   sdk.ResourceCTMark,
	flow.MatchMetadata: sdk.ResourceMetadata,
	flow.MatchPktMark:  sdk.ResourcePktMark,
	flow.MatchCTLabel:  sdk.ResourceCTLabel,
}

// operandBits is the mask an operand covers in a header field.
func operandBits(offset, width uint8) flow.Uint128 {
	return sdk.Grant{Kind: sdk.ResourceCTLabel, Offset: offset, Width: min(width, 64)}.Mask128()
}

// checkResources refuses a flow that uses a ct zone, or bits of ct_mark,
// ct_label, metadata or pkt_mark, that the plugin was not granted (nor
// were published to it), or outputs to another plugin's port.
func (a *Arbiter) checkResources(owner string, t *Table, f *flow.Flow) error {
	v := a.grantView(owner)
	where := fmt.Sprintf("flow in table %q", t.Name)
	for _, m := range f.Match.Fields() {
		var err error
		switch m.Kind {
		case flow.MatchCTZone:
			err = v.zone(where, uint32(m.Uint()))
		case flow.MatchCTMark:
			err = v.bits(where, sdk.ResourceCTMark, m.MaskUint()&0xffffffff)
		case flow.MatchMetadata:
			err = v.bits(where, sdk.ResourceMetadata, m.MaskUint())
		case flow.MatchPktMark:
			err = v.bits(where, sdk.ResourcePktMark, m.MaskUint()&0xffffffff)
		case flow.MatchCTLabel:
			mask := flow.Uint128{Hi: ^uint64(0), Lo: ^uint64(0)}
			if m.Mask != nil {
				mask = flow.Uint128From(m.Mask)
			}
			err = v.bits128(where, sdk.ResourceCTLabel, mask)
		}
		if err != nil {
			return err
		}
	}
	return a.checkActions(v, where, f.Actions)
}

// CheckActions checks actions that are not a flow's (a group's buckets, a
// packet-out's actions) the way Resolve checks a flow's: granted zones
// and bits only, and only ports the plugin may output to. where names
// them in the error.
func (a *Arbiter) CheckActions(owner, where string, acts []flow.Action) error {
	return a.checkActions(a.grantView(owner), where, acts)
}

func (a *Arbiter) checkActions(v grantView, where string, acts []flow.Action) error {
	for _, act := range acts {
		var err error
		switch act := act.(type) {
		case *flow.ActCT:
			if err = v.zone(where, uint32(act.Zone)); err == nil {
				if err = v.bits(where, sdk.ResourceCTMark, uint64(act.MarkMask)); err == nil {
					err = v.bits128(where, sdk.ResourceCTLabel, act.LabelMask)
				}
			}
		case *flow.ActSetField:
			if kind, shared := headerKinds[act.Kind]; shared {
				mask := flow.Uint128From(act.Mask)
				if act.Mask == nil {
					mask = operandBits(0, uint8(min(act.Kind.Size()*8, 64)))
				}
				err = v.bits128(where, kind, mask)
			}
		case *flow.ActMove:
			if k, off, width, ok := act.To.Header(); ok {
				if kind, shared := headerKinds[k]; shared {
					err = v.bits128(where, kind, operandBits(off, width))
				}
			}
		case *flow.ActOutput:
			err = a.checkOutput(v.owner, where, act.Port)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// overlaps reports whether two grants of one kind share a bit.
func overlaps(a, b sdk.Grant) bool {
	ma, mb := a.Mask128(), b.Mask128()
	return ma.Hi&mb.Hi != 0 || ma.Lo&mb.Lo != 0
}
