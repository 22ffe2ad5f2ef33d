package flowstore

import (
	"fmt"
	"maps"
	"slices"

	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Entry is one installed flow.
type Entry struct {
	Key pipeline.Key
	R   *pipeline.Resolved
}

// GroupEntry is one installed group (global ID).
type GroupEntry struct {
	Owner  string
	Global uint32
	Prefix uint16
	Round  uint16 // the owner's round that last wrote it
	Group  *flow.Group
}

// MeterEntry is one installed meter (global ID).
type MeterEntry struct {
	Owner  string
	Global uint32
	Round  uint16 // the owner's round that last wrote it
	Meter  *flow.Meter
}

type owned struct {
	flows  map[pipeline.Key]*Entry
	groups map[uint32]*GroupEntry
	meters map[uint32]*MeterEntry
}

// Store holds installed state. Not safe for concurrent use.
type Store struct {
	byKey  map[pipeline.Key]*Entry
	owners map[string]*owned
}

// New returns an empty store.
func New() *Store {
	return &Store{byKey: map[pipeline.Key]*Entry{}, owners: map[string]*owned{}}
}

func (s *Store) owner(name string) *owned {
	o, ok := s.owners[name]
	if !ok {
		o = &owned{flows: map[pipeline.Key]*Entry{}, groups: map[uint32]*GroupEntry{}, meters: map[uint32]*MeterEntry{}}
		s.owners[name] = o
	}
	return o
}

// Change is one switch operation of a plan.
type Change struct {
	Kind flow.OpKind
	// Exactly one of these is set.
	Flow  *Entry
	Group *GroupEntry
	Meter *MeterEntry
}

// Plan is a checked batch, ready to send. Changes are in batch order, with
// later operations on the same key superseding earlier ones.
type Plan struct {
	Owner   string
	Changes []Change
}

// Op is one resolved operation handed to Plan.
type Op struct {
	Kind   flow.OpKind
	Flow   *pipeline.Resolved // for flows
	Group  *flow.Group        // plugin-local ID
	Meter  *flow.Meter        // plugin-local ID
	Prefix uint16             // owner's prefix, for group/meter IDs
	Round  uint16             // owner's round, recorded on groups/meters
}

// Plan checks ops of owner against the store: conflicts with other owners,
// deletes of other owners' objects, and the owner's flow limit (0: none).
func (s *Store) Plan(owner string, ops []Op, maxFlows int) (*Plan, error) {
	p := &Plan{Owner: owner, Changes: make([]Change, 0, len(ops))}
	o := s.owners[owner]
	count := 0
	if o != nil {
		count = len(o.flows)
	}
	// pending tracks keys this batch adds or deletes, so the count stays right
	// when a batch touches the same key twice.
	pending := map[pipeline.Key]bool{}
	for i, op := range ops {
		switch {
		case op.Flow != nil:
			e := &Entry{Key: op.Flow.Key(), R: op.Flow}
			cur := s.byKey[e.Key]
			if cur != nil && cur.R.Owner != owner {
				verb := "install"
				if op.Kind == flow.OpDelete {
					verb = "delete"
				}
				return nil, fmt.Errorf("%w: plugin %q cannot %s flow %s (op %d): plugin %q already holds that table, priority and match",
					sdk.ErrConflict, owner, verb, e.Key, i, cur.R.Owner)
			}
			present, seen := pending[e.Key]
			if !seen {
				present = cur != nil
			}
			switch op.Kind {
			case flow.OpAdd, flow.OpModify:
				if !present {
					count++
				}
				pending[e.Key] = true
			case flow.OpDelete:
				if present {
					count--
				}
				pending[e.Key] = false
			}
			p.Changes = append(p.Changes, Change{Kind: op.Kind, Flow: e})
		case op.Group != nil:
			g := &GroupEntry{Owner: owner, Global: pipeline.GroupID(op.Prefix, op.Group.ID), Prefix: op.Prefix, Round: op.Round, Group: op.Group}
			p.Changes = append(p.Changes, Change{Kind: op.Kind, Group: g})
		case op.Meter != nil:
			m := &MeterEntry{Owner: owner, Global: pipeline.MeterID(op.Prefix, op.Meter.ID), Round: op.Round, Meter: op.Meter}
			p.Changes = append(p.Changes, Change{Kind: op.Kind, Meter: m})
		}
	}
	if maxFlows > 0 && count > maxFlows {
		return nil, fmt.Errorf("%w: plugin %q would hold %d flows, over its limit of %d", sdk.ErrLimit, owner, count, maxFlows)
	}
	return p, nil
}

// Commit records a plan the switch accepted.
func (s *Store) Commit(p *Plan) {
	o := s.owner(p.Owner)
	for _, c := range p.Changes {
		switch {
		case c.Flow != nil:
			if c.Kind == flow.OpDelete {
				if cur := s.byKey[c.Flow.Key]; cur != nil && cur.R.Owner == p.Owner {
					delete(s.byKey, c.Flow.Key)
					delete(o.flows, c.Flow.Key)
				}
				continue
			}
			s.byKey[c.Flow.Key] = c.Flow
			o.flows[c.Flow.Key] = c.Flow
		case c.Group != nil:
			if c.Kind == flow.OpDelete {
				delete(o.groups, c.Group.Global)
			} else {
				o.groups[c.Group.Global] = c.Group
			}
		case c.Meter != nil:
			if c.Kind == flow.OpDelete {
				delete(o.meters, c.Meter.Global)
			} else {
				o.meters[c.Meter.Global] = c.Meter
			}
		}
	}
}

// Count is the number of flows owner holds.
func (s *Store) Count(owner string) int {
	if o := s.owners[owner]; o != nil {
		return len(o.flows)
	}
	return 0
}

// Total is the number of flows held.
func (s *Store) Total() int { return len(s.byKey) }

// Owner returns who holds a key.
func (s *Store) Owner(k pipeline.Key) (string, bool) {
	e, ok := s.byKey[k]
	if !ok {
		return "", false
	}
	return e.R.Owner, true
}

// Flows returns owner's flows sorted by key (for replay and introspection).
func (s *Store) Flows(owner string) []*Entry {
	o := s.owners[owner]
	if o == nil {
		return nil
	}
	keys := slices.SortedFunc(maps.Keys(o.flows), compareKeys)
	out := make([]*Entry, len(keys))
	for i, k := range keys {
		out[i] = o.flows[k]
	}
	return out
}

// Groups returns owner's groups sorted by global ID.
func (s *Store) Groups(owner string) []*GroupEntry {
	o := s.owners[owner]
	if o == nil {
		return nil
	}
	var out []*GroupEntry
	for _, id := range slices.Sorted(maps.Keys(o.groups)) {
		out = append(out, o.groups[id])
	}
	return out
}

// Meters returns owner's meters sorted by global ID.
func (s *Store) Meters(owner string) []*MeterEntry {
	o := s.owners[owner]
	if o == nil {
		return nil
	}
	var out []*MeterEntry
	for _, id := range slices.Sorted(maps.Keys(o.meters)) {
		out = append(out, o.meters[id])
	}
	return out
}

// Owners lists owners with state, sorted.
func (s *Store) Owners() []string { return slices.Sorted(maps.Keys(s.owners)) }

// Stale returns owner's flows whose cookie round is not round: what a
// restarted plugin did not re-install before it said it was synced.
func (s *Store) Stale(owner string, round uint16) []*Entry {
	var out []*Entry
	for _, e := range s.Flows(owner) {
		if _, r, _ := pipeline.SplitCookie(e.R.Cookie); r != round {
			out = append(out, e)
		}
	}
	return out
}

// StaleObjects returns owner's groups and meters last written by another
// round than round (groups and meters carry no cookie, so only the store
// knows them).
func (s *Store) StaleObjects(owner string, round uint16) ([]*GroupEntry, []*MeterEntry) {
	var gs []*GroupEntry
	var ms []*MeterEntry
	for _, g := range s.Groups(owner) {
		if g.Round != round {
			gs = append(gs, g)
		}
	}
	for _, m := range s.Meters(owner) {
		if m.Round != round {
			ms = append(ms, m)
		}
	}
	return gs, ms
}

// ForgetObjects drops groups and meters from the store.
func (s *Store) ForgetObjects(owner string, gs []*GroupEntry, ms []*MeterEntry) {
	o := s.owners[owner]
	if o == nil {
		return
	}
	for _, g := range gs {
		delete(o.groups, g.Global)
	}
	for _, m := range ms {
		delete(o.meters, m.Global)
	}
}

// Forget drops entries from the store (after the switch deleted them).
func (s *Store) Forget(owner string, es []*Entry) {
	o := s.owners[owner]
	if o == nil {
		return
	}
	for _, e := range es {
		if cur := s.byKey[e.Key]; cur == e {
			delete(s.byKey, e.Key)
		}
		delete(o.flows, e.Key)
	}
}

// ForgetTable drops every flow, of any owner, in a table ID (the table was
// removed with its plugin).
func (s *Store) ForgetTable(id uint8) {
	for k, e := range s.byKey {
		if k.Table == id {
			delete(s.byKey, k)
			delete(s.owners[e.R.Owner].flows, k)
		}
	}
}

// DropOwner removes everything owner holds.
func (s *Store) DropOwner(owner string) {
	o := s.owners[owner]
	if o == nil {
		return
	}
	for k := range o.flows {
		delete(s.byKey, k)
	}
	delete(s.owners, owner)
}

func compareKeys(a, b pipeline.Key) int {
	if a.Table != b.Table {
		return int(a.Table) - int(b.Table)
	}
	if a.Priority != b.Priority {
		return int(b.Priority) - int(a.Priority)
	}
	switch {
	case a.Match < b.Match:
		return -1
	case a.Match > b.Match:
		return 1
	}
	return 0
}
