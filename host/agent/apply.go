package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/flowstore"
	"switchyard.dev/switchyard/host/ofxlate"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Apply arbitrates a batch from owner and installs it atomically (one
// OpenFlow bundle). It is what a plugin's Host.Apply ends in, and what the
// host itself uses for its own flows. lim bounds batch size and flow count.
//
// Batches of one owner run one at a time; batches of different owners run
// side by side, so a plugin's large batch never waits for, nor delays,
// another plugin's small one on the host side. Only a layout change (a
// plugin loading or unloading, a sweep, a replay) waits for the batches in
// flight.
func (a *Agent) Apply(ctx context.Context, owner string, b *flow.Batch, lim config.Limits) error {
	if err := b.Validate(); err != nil {
		return fmt.Errorf("%w: plugin %q: %v", sdk.ErrInvalid, owner, err)
	}
	if lim.MaxBatch > 0 && b.Len() > lim.MaxBatch {
		return fmt.Errorf("%w: plugin %q: batch of %d operations is over its limit of %d; split it", sdk.ErrLimit, owner, b.Len(), lim.MaxBatch)
	}
	y := a.yielder(owner, b.Len())
	y.wait(ctx)
	ol := a.ownerLock(owner)
	ol.Lock()
	defer ol.Unlock()
	a.lay.RLock()
	defer a.lay.RUnlock()
	// The arbiter only changes under a.lay held exclusively, so reading it
	// here needs no other lock.
	p, ok := a.arb.Plugin(owner)
	if !ok {
		return fmt.Errorf("%w: plugin %q is not registered", sdk.ErrInvalid, owner)
	}
	ops := make([]flowstore.Op, 0, b.Len())
	for i, op := range b.Ops {
		if i%lockPart == lockPart-1 {
			y.wait(ctx)
		}
		switch {
		case op.Kind == flow.OpDeleteTagged && op.Flow != nil:
			// The store is read here, and other owners' batches commit into
			// it under a.mu: without it, a pod's DEL (a delete by tag)
			// running beside a large batch of another plugin crashed the
			// agent (concurrent map iteration and write).
			a.mu.Lock()
			var err error
			ops, err = a.expandTaggedLocked(owner, i, op, ops)
			a.mu.Unlock()
			if err != nil {
				return err
			}
		case op.Flow != nil:
			r, err := a.arb.Resolve(owner, op.Flow)
			if err != nil {
				return fmt.Errorf("batch op %d: %w", i, err)
			}
			ops = append(ops, flowstore.Op{Kind: op.Kind, Flow: r})
		case op.Group != nil:
			if op.Kind != flow.OpDelete {
				for bi, bk := range op.Group.Buckets {
					if err := a.arb.CheckActions(owner, fmt.Sprintf("group %d bucket %d", op.Group.ID, bi), bk.Actions); err != nil {
						return fmt.Errorf("batch op %d: %w", i, err)
					}
				}
			}
			ops = append(ops, flowstore.Op{Kind: op.Kind, Group: op.Group, Prefix: p.Prefix, Round: p.Round})
		case op.Meter != nil:
			ops = append(ops, flowstore.Op{Kind: op.Kind, Meter: op.Meter, Prefix: p.Prefix, Round: p.Round})
		}
	}
	err := a.applyOps(ctx, owner, ops, lim.MaxFlows, y)
	if y != nil && y.waited > 0 {
		a.metrics.ObserveYield(owner, y.waited)
		a.log.Debug("batch paused for pod requests", "plugin", owner, "ops", b.Len(), "paused", y.waited)
	}
	return err
}

// ownerLock is the lock that serialises one owner's batches.
func (a *Agent) ownerLock(owner string) *sync.Mutex {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, ok := a.owners[owner]
	if !ok {
		l = &sync.Mutex{}
		a.owners[owner] = l
	}
	return l
}

// lockPart is how many operations applyOps plans, or commits, per hold of
// a.mu: a 20,000-flow batch planned in one hold kept a.mu for 25-60 ms,
// and every other plugin's batch (a pod's 9 flows in a CNI ADD) waited
// that long behind it.
const lockPart = 256

// applyOps plans ops against the store, installs the plan and commits it.
// The caller holds a.lay (shared or exclusive) and, for a plugin's batch,
// the owner's lock. What needs only the ops (keys, encodings) is done
// before a.mu is taken; then a.mu is held only to plan and reserve, and
// later to commit, lockPart operations at a time, and never across the
// switch round trip. The keys planned so far are reserved, so a batch of
// another owner planned between two parts, or while this one is on the
// switch, sees them and conflicts exactly as it would with installed
// flows; and a part that finds a key another owner holds or reserves
// fails the whole batch, whose reservations are then released.
//
// y, when not nil, pauses the batch between parts while pod requests are
// in flight (cnigate.go).
func (a *Agent) applyOps(ctx context.Context, owner string, ops []flowstore.Op, maxFlows int, y *yielder) error {
	flowstore.Prepare(ops)
	a.mu.Lock()
	pl := a.store.Planner(owner, len(ops), maxFlows)
	a.mu.Unlock()
	reserved := 0 // pl.Changes()[:reserved] are reserved
	released := false
	defer func() {
		if !released {
			a.release(owner, pl.Changes()[:reserved])
		}
	}()
	for from := 0; from < len(ops); from += lockPart {
		y.wait(ctx)
		a.mu.Lock()
		err := pl.Add(ops[from:min(from+lockPart, len(ops))])
		if err == nil {
			cs := pl.Changes()
			if err = a.reserveLocked(owner, cs[reserved:]); err == nil {
				reserved = len(cs)
			}
		}
		a.mu.Unlock()
		if err != nil {
			return err
		}
	}
	plan, err := pl.Plan()
	if err != nil {
		return err
	}
	pre, msgs, post, err := a.planMessages(plan)
	if err != nil {
		return err
	}
	// OVS does not take meter mods inside a bundle, so meters are added
	// before it and deleted after it; a refused bundle takes its new meters
	// back, keeping the batch all-or-nothing.
	if err := a.sendMeters(ctx, pre); err != nil {
		return fmt.Errorf("%w: plugin %q: the switch refused a meter (nothing was applied): %v", sdk.ErrSwitch, owner, err)
	}
	if len(msgs) > 0 { // only refreshes (or meters): the switch already holds the batch
		sw, done := a.lane()
		bctx := ctx
		if y != nil {
			bctx = openflow.WithPacer(ctx, y.wait)
		}
		err = sw.Bundle(bctx, msgs, true)
		done()
	}
	if err != nil {
		a.undoMeters(ctx, pre)
		return fmt.Errorf("%w: plugin %q: the switch refused a batch of %d operations (nothing was applied): %v", sdk.ErrSwitch, owner, len(msgs)+len(pre), err)
	}
	if err := a.sendMeters(ctx, post); err != nil {
		a.log.Error("deleting meters after a batch", "plugin", owner, "error", err)
	}
	// Each part's keys go from reserved to installed in one hold, so
	// another owner never finds one of them free.
	for from := 0; from < len(plan.Changes); from += lockPart {
		to := min(from+lockPart, len(plan.Changes))
		a.mu.Lock()
		a.store.CommitPart(plan, from, to)
		a.releaseLocked(owner, plan.Changes[from:to])
		a.mu.Unlock()
	}
	released = true
	return nil
}

// reserveLocked marks the flow keys of changes as in flight for owner,
// refusing them all if another owner's plan in flight touches one of them.
func (a *Agent) reserveLocked(owner string, cs []flowstore.Change) error {
	for _, c := range cs {
		if c.Flow == nil {
			continue
		}
		if other, busy := a.inflight[c.Flow.Key]; busy && other != owner {
			return fmt.Errorf("%w: plugin %q cannot write flow %s: plugin %q is installing that table, priority and match right now",
				sdk.ErrConflict, owner, c.Flow.Key, other)
		}
	}
	for _, c := range cs {
		if c.Flow != nil {
			a.inflight[c.Flow.Key] = owner
		}
	}
	return nil
}

// release gives up owner's reservations of changes.
func (a *Agent) release(owner string, cs []flowstore.Change) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked(owner, cs)
}

func (a *Agent) releaseLocked(owner string, cs []flowstore.Change) {
	for _, c := range cs {
		if c.Flow != nil && a.inflight[c.Flow.Key] == owner {
			delete(a.inflight, c.Flow.Key)
		}
	}
}

func (a *Agent) sendMeters(ctx context.Context, ms []*openflow.MeterMod) error {
	for _, m := range ms {
		if _, err := a.sw.Request(ctx, m); err != nil {
			return fmt.Errorf("meter %d: %w", m.MeterID, err)
		}
	}
	return nil
}

// undoMeters deletes the meters a refused batch added (meters it only
// modified keep their new bands: OpenFlow cannot read them back cheaply).
func (a *Agent) undoMeters(ctx context.Context, ms []*openflow.MeterMod) {
	for _, m := range ms {
		if m.Command != openflow.MeterAdd {
			continue
		}
		if _, err := a.sw.Request(ctx, &openflow.MeterMod{Command: openflow.MeterDelete, MeterID: m.MeterID}); err != nil {
			a.log.Error("undo meter of a refused batch", "meter", m.MeterID, "error", err)
		}
	}
}

// fields is every register field owner may use in group buckets. The
// caller holds a.lay or a.mu.
func (a *Agent) fields(owner string) map[string]flow.Bits {
	f := flow.WellKnownBits()
	if p, ok := a.arb.Plugin(owner); ok {
		maps.Copy(f, p.Bits)
	}
	return f
}

// bucketContext is what translating owner's group buckets (and packet-out
// actions) needs: its fields, its prefix, and the tables a resubmit may
// name.
func (a *Agent) bucketContext(owner string, fields map[string]flow.Bits, prefix uint16) *ofxlate.Context {
	arb := a.arb
	return &ofxlate.Context{Fields: fields, Prefix: prefix, Table: func(j flow.Jump) (uint8, error) { return arb.WritableTable(owner, j) }}
}

// planMessages orders a plan for the switch: meter adds (sent before
// the bundle), the bundle itself (group adds, flows, group deletes, so a
// flow can use a group of the same batch), and meter deletes (after).
func (a *Agent) planMessages(p *flowstore.Plan) (pre []*openflow.MeterMod, msgs []openflow.Message, post []*openflow.MeterMod, err error) {
	var groupsPre, groupsPost []openflow.Message
	fields := a.fields(p.Owner)
	for _, c := range p.Changes {
		switch {
		case c.Flow != nil:
			if c.Refresh {
				continue // the switch holds it as submitted
			}
			m, err := ofxlate.FlowMod(c.Kind, c.Flow.R)
			if err != nil {
				return nil, nil, nil, err
			}
			msgs = append(msgs, m)
		case c.Group != nil:
			m, err := ofxlate.GroupMod(c.Kind, c.Group, a.bucketContext(p.Owner, fields, c.Group.Prefix))
			if err != nil {
				return nil, nil, nil, err
			}
			if c.Kind == flow.OpDelete {
				groupsPost = append(groupsPost, m)
			} else {
				groupsPre = append(groupsPre, m)
			}
		case c.Meter != nil:
			m := ofxlate.MeterMod(c.Kind, c.Meter)
			if c.Kind == flow.OpDelete {
				post = append(post, m)
			} else {
				pre = append(pre, m)
			}
		}
	}
	return pre, append(append(groupsPre, msgs...), groupsPost...), post, nil
}

// allMessages is everything the store holds, as adds, for a replay:
// meters (sent on their own) and the groups and flows for the bundle.
func (a *Agent) allMessages() ([]*openflow.MeterMod, []openflow.Message, error) {
	var meters []*openflow.MeterMod
	var groups, flows []openflow.Message
	for _, owner := range a.store.Owners() {
		for _, m := range a.store.Meters(owner) {
			meters = append(meters, ofxlate.MeterMod(flow.OpAdd, m))
		}
		fields := a.fields(owner)
		for _, g := range a.store.Groups(owner) {
			m, err := ofxlate.GroupMod(flow.OpAdd, g, a.bucketContext(owner, fields, g.Prefix))
			if err != nil {
				return nil, nil, err
			}
			groups = append(groups, m)
		}
		for _, e := range a.store.Flows(owner) {
			m, err := ofxlate.FlowMod(flow.OpAdd, e.R)
			if err != nil {
				return nil, nil, err
			}
			flows = append(flows, m)
		}
	}
	return meters, append(groups, flows...), nil
}

// Synced sweeps owner's flows from earlier rounds: on the switch by cookie
// (which also catches flows installed before an agent restart), and in the
// store. It returns how many stored flows it removed.
func (a *Agent) Synced(ctx context.Context, owner string) (int, error) {
	a.lay.Lock()
	defer a.lay.Unlock()
	p, ok := a.arb.Plugin(owner)
	if !ok {
		return 0, fmt.Errorf("%w: plugin %q is not registered", sdk.ErrInvalid, owner)
	}
	var msgs []openflow.Message
	// Rounds of an earlier agent process go by cookie: the store never
	// saw their flows. Rounds of this process are known flow by flow, and
	// an unchanged flow re-submitted since keeps its older cookie on the
	// switch (flowstore.Change.Refresh), so those go by key: exactly the
	// flows this round did not submit.
	for _, r := range p.Unswept {
		// Learned flows are spared (learned.go): no round of the plugin's
		// is theirs.
		if a.bornRounds[owner][r] || sparedBySweep(pipeline.Cookie(p.Prefix, r, 0)) {
			continue
		}
		msgs = append(msgs, &openflow.FlowMod{Command: openflow.FlowDelete, CookieMask: pipeline.CookieOwnerMask,
			Flow: openflow.Flow{Table: openflow.TableAll, Cookie: pipeline.Cookie(p.Prefix, r, 0)}})
	}
	stale := a.store.Stale(owner, p.Round)
	for _, e := range stale {
		m, err := ofxlate.FlowMod(flow.OpDelete, e.R)
		if err != nil {
			return 0, err
		}
		msgs = append(msgs, m)
	}
	// Groups and meters of earlier rounds that this round did not write
	// again go too (after the flows that might use them).
	staleGroups, staleMeters := a.store.StaleObjects(owner, p.Round)
	for _, g := range staleGroups {
		msgs = append(msgs, &openflow.GroupMod{Command: openflow.GroupDelete, GroupID: g.Global})
	}
	if len(msgs) > 0 {
		if err := a.sw.Bundle(ctx, msgs, true); err != nil {
			return 0, fmt.Errorf("%w: plugin %q: sweeping stale rounds %v: %v", sdk.ErrSwitch, owner, p.Unswept, err)
		}
	}
	for _, m := range staleMeters {
		if _, err := a.sw.Request(ctx, &openflow.MeterMod{Command: openflow.MeterDelete, MeterID: m.Global}); err != nil {
			a.log.Error("sweep stale meter", "plugin", owner, "meter", m.Global, "error", err)
		}
	}
	a.mu.Lock()
	a.store.ForgetObjects(owner, staleGroups, staleMeters)
	a.store.Forget(owner, stale)
	a.arb.Swept(owner)
	flows := a.store.Count(owner)
	a.mu.Unlock()
	a.saveState()
	a.log.Info("plugin synced; stale flows swept", "plugin", owner, "round", p.Round, "swept_rounds", p.Unswept,
		"stale_flows", len(stale), "stale_groups", len(staleGroups), "stale_meters", len(staleMeters), "flows", flows)
	return len(stale), nil
}

// layoutChange gathers everything one layout change does to the switch
// (the loaded plugin's miss flows, other plugins' re-pointed jumps, an
// unloaded plugin's deletions), so it lands in one atomic bundle: a packet
// meets either the old layout or the new one, never a mix.
type layoutChange struct {
	msgs  []openflow.Message
	plans []*flowstore.Plan
	// after runs once the switch took the bundle (store updates that are
	// not plans).
	after []func()
}

// commit sends the change and records it in the store. The caller holds
// a.lay exclusively.
func (a *Agent) commitLayout(ctx context.Context, lc *layoutChange, what string) error {
	if len(lc.msgs) > 0 {
		if err := a.sw.Bundle(ctx, lc.msgs, true); err != nil {
			return fmt.Errorf("%w: %s (%d switch operations in one bundle, none applied): %v", sdk.ErrSwitch, what, len(lc.msgs), err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range lc.plans {
		a.store.Commit(p)
	}
	for _, f := range lc.after {
		f()
	}
	return nil
}

// registerLocked registers (or re-registers) owner and, in one bundle,
// installs the miss flows of its tables and re-points layout-dependent
// flows of everyone (a new table may now be someone's "next table"). The
// caller holds a.lay exclusively.
func (a *Agent) registerLocked(ctx context.Context, owner string, desc *sdk.DescribeResponse) (pipeline.Plugin, error) {
	before := a.arb.Layout()
	a.mu.Lock()
	p, err := a.arb.Register(owner, desc.Tables, desc.Fields, desc.Resources...)
	a.mu.Unlock()
	if err != nil {
		return pipeline.Plugin{}, err
	}
	if a.bornRounds[owner] == nil {
		a.bornRounds[owner] = map[uint16]bool{}
	}
	a.bornRounds[owner][p.Round] = true
	a.saveState()
	lc := &layoutChange{}
	if !slices.EqualFunc(before, a.arb.Layout(), func(x, y pipeline.Table) bool {
		return x.Name == y.Name && x.ID == y.ID && x.Miss == y.Miss
	}) {
		if err := a.relayout(lc, gone(before, a.arb.Layout())); err != nil {
			return *p, err
		}
	}
	// A re-registered plugin has a new round: its miss flows get the new
	// cookie, or its Synced would sweep them.
	if err := a.syncMissFlows(lc); err != nil {
		return *p, fmt.Errorf("table-miss flows: %w", err)
	}
	if err := a.commitLayout(ctx, lc, fmt.Sprintf("loading plugin %q", owner)); err != nil {
		return *p, err
	}
	return *p, nil
}

// gone lists the table IDs of before that after no longer has (by name
// and ID).
func gone(before, after []pipeline.Table) map[uint8]bool {
	now := map[uint8]string{}
	for _, t := range after {
		now[t.ID] = t.Name
	}
	out := map[uint8]bool{}
	for _, t := range before {
		if now[t.ID] != t.Name {
			out[t.ID] = true
		}
	}
	return out
}

// syncMissFlows adds to lc what makes every table's host-installed miss
// flow match the layout and its owner's round: added where missing,
// re-pointed where the next table changed, removed where the table became
// the last one. A priority-0 match-all flow the plugin installed itself is
// left alone.
func (a *Agent) syncMissFlows(lc *layoutChange) error {
	byOwner := map[string][]flowstore.Op{}
	for _, t := range a.arb.Layout() {
		r, err := a.arb.MissFlow(t.Name)
		if err != nil {
			return err
		}
		key := pipeline.Key{Table: t.ID}
		cur, _ := a.store.Get(key)
		if cur != nil && cur.R.Owner != t.Owner {
			cur = nil
		}
		switch {
		case cur != nil && !cur.R.Miss:
			continue // the plugin's own catch-all
		case r == nil && cur != nil:
			byOwner[t.Owner] = append(byOwner[t.Owner], flowstore.Op{Kind: flow.OpDelete, Flow: cur.R})
		case r != nil && (cur == nil || cur.R.Goto != r.Goto || cur.R.Cookie != r.Cookie):
			byOwner[t.Owner] = append(byOwner[t.Owner], flowstore.Op{Kind: flow.OpAdd, Flow: r})
		}
	}
	for _, owner := range slices.Sorted(maps.Keys(byOwner)) {
		plan, err := a.store.Plan(owner, byOwner[owner], 0)
		if err != nil {
			return err
		}
		_, msgs, _, err := a.planMessages(plan)
		if err != nil {
			return err
		}
		lc.msgs = append(lc.msgs, msgs...)
		lc.plans = append(lc.plans, plan)
	}
	return nil
}

// RegisterLocal registers an in-host owner (no plugin process) and returns
// its assignment; the host uses it for its own flows and benchmarks use it
// as the direct path.
func (a *Agent) RegisterLocal(ctx context.Context, owner string, desc *sdk.DescribeResponse) (sdk.Assignment, error) {
	a.lay.Lock()
	defer a.lay.Unlock()
	if _, err := a.registerLocked(ctx, owner, desc); err != nil {
		return sdk.Assignment{}, err
	}
	asg, _ := a.arb.Assignment(owner)
	return asg, nil
}

// relayout adds to lc every flow whose jumps depend on the layout and
// whose targets moved (each keeps its cookie), and the deletion of every
// flow that jumps into a table that is gone and no longer resolves: a
// flow is never left pointing at a table nobody owns.
func (a *Agent) relayout(lc *layoutChange, removed map[uint8]bool) error {
	for _, owner := range a.store.Owners() {
		var changes []flowstore.Change
		repointed, dropped := 0, 0
		// Only flows whose jumps depend on the layout can move; when a table
		// went away, any flow may jump into it, so all are looked at.
		entries := a.store.LayoutFlows(owner)
		if len(removed) > 0 {
			entries = a.store.Flows(owner)
		}
		for _, e := range entries {
			if e.R.Miss || removed[e.Key.Table] {
				continue // miss flows: syncMissFlows; flows in a removed table go with it
			}
			intoGone := removed[e.R.Goto] || slices.ContainsFunc(e.R.Jumps, func(id uint8) bool { return removed[id] })
			if !e.R.Layout && !intoGone {
				continue
			}
			r, err := a.arb.Resolve(owner, e.R.Flow)
			if err != nil {
				m, err2 := ofxlate.FlowMod(flow.OpDelete, e.R)
				if err2 != nil {
					return err2
				}
				lc.msgs = append(lc.msgs, m)
				changes = append(changes, flowstore.Change{Kind: flow.OpDelete, Flow: e})
				dropped++
				a.log.Warn("flow no longer resolves after a layout change; removing it", "plugin", owner, "flow", e.R.String(), "error", err)
				continue
			}
			r.Cookie = e.R.Cookie
			if r.Goto == e.R.Goto && slices.Equal(r.Jumps, e.R.Jumps) {
				continue
			}
			m, err := ofxlate.FlowMod(flow.OpAdd, r)
			if err != nil {
				return err
			}
			lc.msgs = append(lc.msgs, m)
			changes = append(changes, flowstore.Change{Kind: flow.OpAdd, Flow: &flowstore.Entry{Key: e.Key, R: r}})
			repointed++
		}
		if len(changes) == 0 {
			continue
		}
		lc.plans = append(lc.plans, &flowstore.Plan{Owner: owner, Changes: changes})
		a.log.Info("flows re-pointed or removed by a layout change", "plugin", owner, "repointed", repointed, "removed", dropped)
	}
	return nil
}

// removePlugin deletes everything of an unloaded plugin: its flows (by
// cookie prefix), all flows in its tables (others' too, the tables are
// gone), its groups, meters and ports, and its layout entry. The flow and
// group deletions and the re-pointing of other plugins' jumps go to the
// switch in one bundle.
func (a *Agent) removePlugin(ctx context.Context, owner string) {
	ports, err := a.db.Ports(ctx, owner)
	if err != nil {
		a.log.Error("list ports of unloaded plugin", "plugin", owner, "error", err)
	}
	for _, p := range ports {
		if err := a.db.DeletePort(ctx, p.Name); err != nil {
			a.log.Error("delete port of unloaded plugin", "plugin", owner, "port", p.Name, "error", err)
			continue
		}
		a.forgetPort(p.Name)
	}
	a.lay.Lock()
	defer a.lay.Unlock()
	p, ok := a.arb.Plugin(owner)
	if !ok {
		return
	}
	lc := &layoutChange{}
	lc.msgs = append(lc.msgs, &openflow.FlowMod{Command: openflow.FlowDelete, CookieMask: pipeline.CookiePrefixMask,
		Flow: openflow.Flow{Table: openflow.TableAll, Cookie: pipeline.Cookie(p.Prefix, 0, 0)}})
	before := a.arb.Layout()
	for _, tn := range p.Tables {
		t, _ := a.arb.Table(tn)
		lc.msgs = append(lc.msgs, &openflow.FlowMod{Command: openflow.FlowDelete, Flow: openflow.Flow{Table: t.ID}})
	}
	for _, g := range a.store.Groups(owner) {
		lc.msgs = append(lc.msgs, &openflow.GroupMod{Command: openflow.GroupDelete, GroupID: g.Global})
	}
	meters := a.store.Meters(owner)
	a.mu.Lock()
	removed := a.arb.Unregister(owner)
	for _, t := range removed {
		a.store.ForgetTable(t.ID)
	}
	a.store.DropOwner(owner)
	a.mu.Unlock()
	if err := a.relayout(lc, gone(before, a.arb.Layout())); err != nil {
		a.log.Error("re-point flows after unload", "plugin", owner, "error", err)
	}
	if err := a.syncMissFlows(lc); err != nil {
		a.log.Error("table-miss flows after unload", "plugin", owner, "error", err)
	}
	if err := a.commitLayout(ctx, lc, fmt.Sprintf("unloading plugin %q", owner)); err != nil {
		a.log.Error("delete flows of unloaded plugin", "plugin", owner, "error", err)
	}
	for _, m := range meters {
		if _, err := a.sw.Request(ctx, &openflow.MeterMod{Command: openflow.MeterDelete, MeterID: m.Global}); err != nil {
			a.log.Error("delete meter of unloaded plugin", "plugin", owner, "meter", m.Global, "error", err)
		}
	}
	a.saveState()
	a.log.Info("plugin removed", "plugin", owner, "tables", len(p.Tables), "ports", len(ports))
}
