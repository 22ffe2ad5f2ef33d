package flowstore

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/sdkhost"
)

// Entry is one flow: in a plan, or rebuilt from the store's compact form.
type Entry struct {
	Key pipeline.Key
	R   *pipeline.Resolved

	wire []byte // the flow's wire form, once Prepare has encoded it
	fset string // the intern key of R.Fields, likewise
}

// held is how the store keeps an installed flow: its wire form and the few
// resolved facts that are not in it, about a quarter of the memory of the
// decoded flow and its resolution. The store rebuilds the Entry only when
// it is asked for one (replay, re-layout, sweep, introspection); the hot
// paths (conflict checks, counts) need only the key and the owner.
type held struct {
	owner  *owned
	cookie uint64 // as installed on the switch
	// round is the owner's round that last submitted the flow. It is
	// newer than the cookie's round when a restarted plugin submitted the
	// flow again unchanged: the switch then keeps its copy (Change.Refresh).
	round  uint16
	gotoID uint8
	layout bool
	miss   bool
	jumps  string // one table ID per action carrying a jump (Resolved.Jumps), usually empty
	fields map[string]flow.Bits
	wire   []byte // sdkhost.AppendFlow of the SDK flow
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
	name   string
	flows  int
	groups map[uint32]*GroupEntry
	meters map[uint32]*MeterEntry
}

// Store holds installed state. Not safe for concurrent use.
//
// Flows live in one map for all owners: a second index per owner would
// double the per-flow cost, and the per-owner listings (replay, sweep) are
// rare and walk everything anyway.
type Store struct {
	byKey  map[pipeline.Key]*held
	owners map[string]*owned
	// fieldSets interns the register-field resolutions of flows: flows of
	// one plugin use a handful of distinct sets.
	fieldSets map[string]map[string]flow.Bits
	// KnownRound says whether every flow of owner's round that is on the
	// switch went through this store, so that the sweep after Synced can
	// delete them by key. Only a flow installed under such a cookie may be
	// refreshed (left on the switch with it). nil: no refreshes.
	KnownRound func(owner string, round uint16) bool
}

// New returns an empty store.
func New() *Store {
	return &Store{byKey: map[pipeline.Key]*held{}, owners: map[string]*owned{}, fieldSets: map[string]map[string]flow.Bits{}}
}

// group and meter return what o holds under a global ID (nil: nothing,
// also for a nil o, an owner that never submitted).
func (o *owned) group(id uint32) *GroupEntry {
	if o == nil {
		return nil
	}
	return o.groups[id]
}

func (o *owned) meter(id uint32) *MeterEntry {
	if o == nil {
		return nil
	}
	return o.meters[id]
}

func (s *Store) owner(name string) *owned {
	o, ok := s.owners[name]
	if !ok {
		o = &owned{name: name, groups: map[uint32]*GroupEntry{}, meters: map[uint32]*MeterEntry{}}
		s.owners[name] = o
	}
	return o
}

// compact turns a resolved flow into its stored form.
func (s *Store) compact(o *owned, e *Entry, round uint16) *held {
	r := e.R
	h := &held{owner: o, cookie: r.Cookie, round: round, gotoID: r.Goto, layout: r.Layout, miss: r.Miss,
		jumps: string(r.Jumps), fields: s.internFields(r.Fields, e.fset)}
	h.wire = e.wire
	if h.wire == nil {
		h.wire = wireOf(r)
	}
	return h
}

// wireOf encodes a resolved flow's SDK form, clipped so that it holds no
// spare capacity.
func wireOf(r *pipeline.Resolved) []byte {
	w := sdkhost.AppendFlow(nil, r.Flow)
	return w[:len(w):len(w)]
}

// unchanged reports whether r is the flow h holds, submitted again: same
// flow, same resolution, same owner prefix and tag; only the round of its
// cookie may differ.
func unchanged(h *held, r *pipeline.Resolved, wire []byte) bool {
	const notRound = ^uint64(0xffff << 32)
	return h.cookie&notRound == r.Cookie&notRound && h.gotoID == r.Goto && h.miss == r.Miss && h.layout == r.Layout &&
		h.jumps == string(r.Jumps) && maps.Equal(h.fields, r.Fields) && string(h.wire) == string(wire)
}

// fieldsKey is the intern key of a flow's register fields.
func fieldsKey(f map[string]flow.Bits) string {
	if len(f) == 0 {
		return ""
	}
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(f)) {
		fmt.Fprintf(&b, "%s=%s;", n, f[n])
	}
	return b.String()
}

// internFields returns the store's one copy of f; k is fieldsKey(f) when
// the caller already built it ("" builds it here).
func (s *Store) internFields(f map[string]flow.Bits, k string) map[string]flow.Bits {
	if len(f) == 0 {
		return nil
	}
	if k == "" {
		k = fieldsKey(f)
	}
	if m, ok := s.fieldSets[k]; ok {
		return m
	}
	m := maps.Clone(f)
	s.fieldSets[k] = m
	return m
}

// entry rebuilds the Entry of a stored flow. The wire form was written by
// the store itself, so it always decodes; a failure is a bug worth a panic
// rather than a silently missing flow.
func entry(k pipeline.Key, h *held) *Entry {
	f, err := sdkhost.DecodeFlow(h.wire)
	if err != nil {
		panic(fmt.Sprintf("flowstore: stored flow %s does not decode: %v", k, err))
	}
	prefix, _, _ := pipeline.SplitCookie(h.cookie)
	r := &pipeline.Resolved{Owner: h.owner.name, Flow: f, TableID: k.Table, Cookie: h.cookie, Goto: h.gotoID,
		Fields: h.fields, Prefix: prefix, Layout: h.layout, Miss: h.miss}
	if h.jumps != "" {
		r.Jumps = []uint8(h.jumps)
	}
	return &Entry{Key: k, R: r}
}

// Change is one switch operation of a plan.
type Change struct {
	Kind flow.OpKind
	// Refresh marks an add of a flow the switch already holds exactly as
	// submitted (a restarted plugin re-submitting its flows): nothing is
	// sent, and the store only records the owner's new round on it, so
	// that Stale does not count it. The switch's copy keeps the cookie of
	// the round that installed it; the sweep after Synced deletes stale
	// flows by key for rounds the store has seen (Store.Stale).
	Refresh bool
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

	// What Prepare worked out for a flow, from the flow alone.
	prepared bool
	key      pipeline.Key
	wire     []byte // adds and modifies
	fset     string
}

// Prepare does the part of planning that needs only the ops themselves
// (each flow's key, wire form and field-set key), so that a caller that
// serialises Plan with other work does this outside its lock: for a large
// batch it is most of the cost. Plan prepares what was not.
func Prepare(ops []Op) {
	var p preparer
	for i := range ops {
		p.prepare(&ops[i])
	}
}

// preparer encodes with scratch buffers kept between flows; each wire
// form gets a copy of its own, clipped.
type preparer struct {
	enc sdkhost.FlowEncoder
	buf []byte
}

func (p *preparer) prepare(op *Op) {
	if op.Flow == nil || op.prepared {
		return
	}
	op.key = op.Flow.Key()
	if op.Kind != flow.OpDelete {
		p.buf = p.enc.Append(p.buf[:0], op.Flow.Flow)
		op.wire = slices.Clip(slices.Clone(p.buf))
		op.fset = fieldsKey(op.Flow.Fields)
	}
	op.prepared = true
}

// Plan checks ops of owner against the store: conflicts with other owners,
// deletes of other owners' objects, and the owner's flow limit (0: none).
func (s *Store) Plan(owner string, ops []Op, maxFlows int) (*Plan, error) {
	pl := s.Planner(owner, len(ops), maxFlows)
	if err := pl.Add(ops); err != nil {
		return nil, err
	}
	return pl.Plan()
}

// Planner plans one batch in parts, so a caller that holds a lock around
// the store can let go of it between parts: a part sees the store as it
// is then. Changes planned in earlier parts are the caller's to protect
// from other owners meanwhile (the agent reserves their keys).
type Planner struct {
	s        *Store
	owner    string
	maxFlows int
	p        *Plan
	count    int
	// pending tracks keys this batch adds or deletes, so the count stays
	// right when a batch touches the same key twice.
	pending map[pipeline.Key]bool
	next    int // index of the next op, for errors
}

// Planner starts planning a batch of n ops of owner.
func (s *Store) Planner(owner string, n, maxFlows int) *Planner {
	pl := &Planner{s: s, owner: owner, maxFlows: maxFlows, p: &Plan{Owner: owner, Changes: make([]Change, 0, n)},
		pending: make(map[pipeline.Key]bool, n)}
	if o := s.owners[owner]; o != nil {
		pl.count = o.flows
	}
	return pl
}

// Changes are the changes planned so far.
func (pl *Planner) Changes() []Change { return pl.p.Changes }

// Plan ends planning: it checks the owner's flow limit.
func (pl *Planner) Plan() (*Plan, error) {
	if pl.maxFlows > 0 && pl.count > pl.maxFlows {
		return nil, fmt.Errorf("%w: plugin %q would hold %d flows, over its limit of %d", sdk.ErrLimit, pl.owner, pl.count, pl.maxFlows)
	}
	return pl.p, nil
}

// Add plans the next ops of the batch.
func (pl *Planner) Add(ops []Op) error {
	s, owner, p := pl.s, pl.owner, pl.p
	o := s.owners[owner]
	var prep preparer // for ops the caller did not Prepare
	base := pl.next
	pl.next += len(ops)
	for j := range ops {
		op := &ops[j]
		i := base + j
		switch {
		case op.Flow != nil:
			prep.prepare(op)
			e := &Entry{Key: op.key, R: op.Flow, fset: op.fset}
			cur := s.byKey[e.Key]
			if cur != nil && cur.owner.name != owner {
				verb := "install"
				if op.Kind == flow.OpDelete {
					verb = "delete"
				}
				return fmt.Errorf("%w: plugin %q cannot %s flow %s (op %d): plugin %q already holds that table, priority and match",
					sdk.ErrConflict, owner, verb, e.Key, i, cur.owner.name)
			}
			present, seen := pl.pending[e.Key]
			if !seen {
				present = cur != nil
			}
			refresh := false
			switch op.Kind {
			case flow.OpAdd, flow.OpModify:
				if !present {
					pl.count++
				}
				pl.pending[e.Key] = true
				e.wire = op.wire
				if cur != nil && !seen && s.KnownRound != nil {
					_, r, _ := pipeline.SplitCookie(cur.cookie)
					refresh = s.KnownRound(owner, r) && unchanged(cur, e.R, op.wire)
				}
			case flow.OpDelete:
				if present {
					pl.count--
				}
				pl.pending[e.Key] = false
			}
			p.Changes = append(p.Changes, Change{Kind: op.Kind, Flow: e, Refresh: refresh})
		case op.Group != nil:
			g := &GroupEntry{Owner: owner, Global: pipeline.GroupID(op.Prefix, op.Group.ID), Prefix: op.Prefix, Round: op.Round, Group: op.Group}
			kind := op.Kind
			if cur := o.group(g.Global); kind == flow.OpAdd && cur != nil && cur.Round != op.Round {
				// A restarted plugin re-adds what its earlier incarnation
				// installed: the switch holds the group, so it is rewritten
				// in place (an add would be refused as existing, and the
				// sweep would then remove the earlier round's copy).
				kind = flow.OpModify
			}
			p.Changes = append(p.Changes, Change{Kind: kind, Group: g})
		case op.Meter != nil:
			m := &MeterEntry{Owner: owner, Global: pipeline.MeterID(op.Prefix, op.Meter.ID), Round: op.Round, Meter: op.Meter}
			kind := op.Kind
			if cur := o.meter(m.Global); kind == flow.OpAdd && cur != nil && cur.Round != op.Round {
				kind = flow.OpModify // as for groups
			}
			p.Changes = append(p.Changes, Change{Kind: kind, Meter: m})
		}
	}
	return nil
}

// Commit records a plan the switch accepted.
func (s *Store) Commit(p *Plan) { s.CommitPart(p, 0, len(p.Changes)) }

// CommitPart records changes [from, to) of a plan the switch accepted: a
// caller that holds a lock around the store commits a large plan in parts
// and lets go of the lock between them. Parts are committed in order.
func (s *Store) CommitPart(p *Plan, from, to int) {
	o := s.owner(p.Owner)
	for _, c := range p.Changes[from:to] {
		switch {
		case c.Flow != nil:
			cur := s.byKey[c.Flow.Key]
			if cur != nil && cur.owner != o {
				continue // Plan refused this; never take another owner's flow
			}
			if c.Kind == flow.OpDelete {
				if cur != nil {
					delete(s.byKey, c.Flow.Key)
					o.flows--
				}
				continue
			}
			_, round, _ := pipeline.SplitCookie(c.Flow.R.Cookie)
			if c.Refresh && cur != nil {
				cur.round = round
				continue
			}
			if cur == nil {
				o.flows++
			} else if cur.cookie == c.Flow.R.Cookie {
				round = cur.round // rewritten in place (a re-layout): submitted when it was
			}
			s.byKey[c.Flow.Key] = s.compact(o, c.Flow, round)
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
		return o.flows
	}
	return 0
}

// Total is the number of flows held.
func (s *Store) Total() int { return len(s.byKey) }

// Owner returns who holds a key.
func (s *Store) Owner(k pipeline.Key) (string, bool) {
	h, ok := s.byKey[k]
	if !ok {
		return "", false
	}
	return h.owner.name, true
}

// Get returns the flow installed under k, if any.
func (s *Store) Get(k pipeline.Key) (*Entry, bool) {
	h, ok := s.byKey[k]
	if !ok {
		return nil, false
	}
	return entry(k, h), true
}

// CountByTable is the number of flows held per table ID.
func (s *Store) CountByTable() map[uint8]int {
	out := map[uint8]int{}
	for k := range s.byKey {
		out[k.Table]++
	}
	return out
}

// Flows returns owner's flows sorted by key (for replay and introspection).
func (s *Store) Flows(owner string) []*Entry {
	return s.flows(owner, func(*held) bool { return true })
}

// LayoutFlows returns owner's flows whose jump targets depend on the table
// layout (they name the next table or a stage), sorted by key, except the
// host's own table-miss flows.
func (s *Store) LayoutFlows(owner string) []*Entry {
	return s.flows(owner, func(h *held) bool { return h.layout && !h.miss })
}

func (s *Store) flows(owner string, keep func(*held) bool) []*Entry {
	o := s.owners[owner]
	if o == nil {
		return nil
	}
	var keys []pipeline.Key
	for k, h := range s.byKey {
		if h.owner == o && keep(h) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareKeys)
	out := make([]*Entry, len(keys))
	for i, k := range keys {
		out[i] = entry(k, s.byKey[k])
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

// OwnerRounds returns the owner bits (cookie prefix and round: the high 32
// bits) of every held flow's cookie. A flow a restarted plugin re-submitted
// unchanged keeps the round that installed it, so a round older than the
// plugin's current one can still hold live flows.
func (s *Store) OwnerRounds() map[uint32]bool {
	out := map[uint32]bool{}
	for _, h := range s.byKey {
		out[uint32(h.cookie>>32)] = true
	}
	return out
}

// Owners lists owners with state, sorted.
func (s *Store) Owners() []string { return slices.Sorted(maps.Keys(s.owners)) }

// Stale returns owner's flows that round did not submit: what a restarted
// plugin did not re-install before it said it was synced. Their cookies
// may carry any earlier round (a flow refreshed by several incarnations
// keeps the first one's), so they are deleted by key.
func (s *Store) Stale(owner string, round uint16) []*Entry {
	return s.flows(owner, func(h *held) bool { return h.round != round })
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

// Forget drops entries of owner from the store (after the switch deleted
// them). An entry that was overwritten since it was listed (another cookie)
// stays.
func (s *Store) Forget(owner string, es []*Entry) {
	o := s.owners[owner]
	if o == nil {
		return
	}
	for _, e := range es {
		if cur := s.byKey[e.Key]; cur != nil && cur.owner == o && cur.cookie == e.R.Cookie {
			delete(s.byKey, e.Key)
			o.flows--
		}
	}
}

// ForgetTable drops every flow, of any owner, in a table ID (the table was
// removed with its plugin).
func (s *Store) ForgetTable(id uint8) {
	for k, h := range s.byKey {
		if k.Table == id {
			delete(s.byKey, k)
			h.owner.flows--
		}
	}
}

// DropOwner removes everything owner holds.
func (s *Store) DropOwner(owner string) {
	o := s.owners[owner]
	if o == nil {
		return
	}
	for k, h := range s.byKey {
		if h.owner == o {
			delete(s.byKey, k)
		}
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
