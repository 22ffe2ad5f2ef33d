package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"

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
func (a *Agent) Apply(ctx context.Context, owner string, b *flow.Batch, lim config.Limits) error {
	if err := b.Validate(); err != nil {
		return fmt.Errorf("%w: plugin %q: %v", sdk.ErrInvalid, owner, err)
	}
	if lim.MaxBatch > 0 && b.Len() > lim.MaxBatch {
		return fmt.Errorf("%w: plugin %q: batch of %d operations is over its limit of %d; split it", sdk.ErrLimit, owner, b.Len(), lim.MaxBatch)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.arb.Plugin(owner)
	if !ok {
		return fmt.Errorf("%w: plugin %q is not registered", sdk.ErrInvalid, owner)
	}
	ops := make([]flowstore.Op, 0, b.Len())
	for i, op := range b.Ops {
		switch {
		case op.Kind == flow.OpDeleteTagged && op.Flow != nil:
			var err error
			if ops, err = a.expandTaggedLocked(owner, i, op, ops); err != nil {
				return err
			}
		case op.Flow != nil:
			r, err := a.arb.Resolve(owner, op.Flow)
			if err != nil {
				return fmt.Errorf("batch op %d: %w", i, err)
			}
			ops = append(ops, flowstore.Op{Kind: op.Kind, Flow: r})
		case op.Group != nil:
			ops = append(ops, flowstore.Op{Kind: op.Kind, Group: op.Group, Prefix: p.Prefix, Round: p.Round})
		case op.Meter != nil:
			ops = append(ops, flowstore.Op{Kind: op.Kind, Meter: op.Meter, Prefix: p.Prefix, Round: p.Round})
		}
	}
	return a.applyLocked(ctx, owner, ops, lim.MaxFlows)
}

func (a *Agent) applyLocked(ctx context.Context, owner string, ops []flowstore.Op, maxFlows int) error {
	plan, err := a.store.Plan(owner, ops, maxFlows)
	if err != nil {
		return err
	}
	pre, msgs, post, err := a.planMessagesLocked(plan)
	if err != nil {
		return err
	}
	// OVS does not take meter mods inside a bundle, so meters are added
	// before it and deleted after it; a refused bundle takes its new meters
	// back, keeping the batch all-or-nothing.
	if err := a.sendMetersLocked(ctx, pre); err != nil {
		return fmt.Errorf("%w: plugin %q: the switch refused a meter (nothing was applied): %v", sdk.ErrSwitch, owner, err)
	}
	if len(msgs) == 0 {
		// Only refreshes (or meters): the switch already holds the batch.
	} else if err := a.sw.Bundle(ctx, msgs, true); err != nil {
		a.undoMetersLocked(ctx, pre)
		return fmt.Errorf("%w: plugin %q: the switch refused a batch of %d operations (nothing was applied): %v", sdk.ErrSwitch, owner, len(msgs)+len(pre), err)
	}
	if err := a.sendMetersLocked(ctx, post); err != nil {
		a.log.Error("deleting meters after a batch", "plugin", owner, "error", err)
	}
	a.store.Commit(plan)
	return nil
}

func (a *Agent) sendMetersLocked(ctx context.Context, ms []*openflow.MeterMod) error {
	for _, m := range ms {
		if _, err := a.sw.Request(ctx, m); err != nil {
			return fmt.Errorf("meter %d: %w", m.MeterID, err)
		}
	}
	return nil
}

// undoMetersLocked deletes the meters a refused batch added (meters it only
// modified keep their new bands: OpenFlow cannot read them back cheaply).
func (a *Agent) undoMetersLocked(ctx context.Context, ms []*openflow.MeterMod) {
	for _, m := range ms {
		if m.Command != openflow.MeterAdd {
			continue
		}
		if _, err := a.sw.Request(ctx, &openflow.MeterMod{Command: openflow.MeterDelete, MeterID: m.MeterID}); err != nil {
			a.log.Error("undo meter of a refused batch", "meter", m.MeterID, "error", err)
		}
	}
}

// fieldsLocked is every register field owner may use in group buckets.
func (a *Agent) fieldsLocked(owner string) map[string]flow.Bits {
	f := flow.WellKnownBits()
	if p, ok := a.arb.Plugin(owner); ok {
		maps.Copy(f, p.Bits)
	}
	return f
}

// bucketContextLocked is what translating owner's group buckets (and
// packet-out actions) needs: its fields, its prefix, and the tables a
// resubmit may name.
func (a *Agent) bucketContextLocked(owner string, fields map[string]flow.Bits, prefix uint16) *ofxlate.Context {
	arb := a.arb
	return &ofxlate.Context{Fields: fields, Prefix: prefix, Table: func(j flow.Jump) (uint8, error) { return arb.WritableTable(owner, j) }}
}

// planMessagesLocked orders a plan for the switch: meter adds (sent before
// the bundle), the bundle itself (group adds, flows, group deletes, so a
// flow can use a group of the same batch), and meter deletes (after).
func (a *Agent) planMessagesLocked(p *flowstore.Plan) (pre []*openflow.MeterMod, msgs []openflow.Message, post []*openflow.MeterMod, err error) {
	var groupsPre, groupsPost []openflow.Message
	fields := a.fieldsLocked(p.Owner)
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
			m, err := ofxlate.GroupMod(c.Kind, c.Group, a.bucketContextLocked(p.Owner, fields, c.Group.Prefix))
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

// allMessagesLocked is everything the store holds, as adds, for a replay:
// meters (sent on their own) and the groups and flows for the bundle.
func (a *Agent) allMessagesLocked() ([]*openflow.MeterMod, []openflow.Message, error) {
	var meters []*openflow.MeterMod
	var groups, flows []openflow.Message
	for _, owner := range a.store.Owners() {
		for _, m := range a.store.Meters(owner) {
			meters = append(meters, ofxlate.MeterMod(flow.OpAdd, m))
		}
		fields := a.fieldsLocked(owner)
		for _, g := range a.store.Groups(owner) {
			m, err := ofxlate.GroupMod(flow.OpAdd, g, a.bucketContextLocked(owner, fields, g.Prefix))
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
// store.
func (a *Agent) Synced(ctx context.Context, owner string) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
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
	a.store.ForgetObjects(owner, staleGroups, staleMeters)
	a.store.Forget(owner, stale)
	a.arb.Swept(owner)
	a.saveStateLocked()
	a.log.Info("plugin synced; stale flows swept", "plugin", owner, "round", p.Round, "swept_rounds", p.Unswept, "stale_flows", len(stale), "flows", a.store.Count(owner))
	return len(stale), nil
}

// registerLocked registers (or re-registers) owner and installs the miss
// flows of its tables, then re-resolves layout-dependent flows of everyone
// (a new table may now be someone's "next table").
func (a *Agent) registerLocked(ctx context.Context, owner string, desc *sdk.DescribeResponse) (pipeline.Plugin, error) {
	before := a.arb.Layout()
	p, err := a.arb.Register(owner, desc.Tables, desc.Fields)
	if err != nil {
		return pipeline.Plugin{}, err
	}
	if a.bornRounds[owner] == nil {
		a.bornRounds[owner] = map[uint16]bool{}
	}
	a.bornRounds[owner][p.Round] = true
	a.saveStateLocked()
	if !slices.Equal(before, a.arb.Layout()) {
		if err := a.relayoutLocked(ctx); err != nil {
			return *p, err
		}
	}
	// A re-registered plugin has a new round: its miss flows get the new
	// cookie, or its Synced would sweep them.
	if err := a.syncMissFlowsLocked(ctx); err != nil {
		return *p, fmt.Errorf("install table-miss flows: %w", err)
	}
	return *p, nil
}

// syncMissFlowsLocked makes every table's host-installed miss flow match
// the layout and its owner's round: added where missing, re-pointed where
// the next table changed, removed where the table became the last one. A
// priority-0 match-all flow the plugin installed itself is left alone.
func (a *Agent) syncMissFlowsLocked(ctx context.Context) error {
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
		if err := a.applyLocked(ctx, owner, byOwner[owner], 0); err != nil {
			return err
		}
	}
	return nil
}

// RegisterLocal registers an in-host owner (no plugin process) and returns
// its assignment; the host uses it for its own flows and benchmarks use it
// as the direct path.
func (a *Agent) RegisterLocal(ctx context.Context, owner string, desc *sdk.DescribeResponse) (sdk.Assignment, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.registerLocked(ctx, owner, desc); err != nil {
		return sdk.Assignment{}, err
	}
	asg, _ := a.arb.Assignment(owner)
	return asg, nil
}

// relayoutLocked re-resolves every flow whose jumps depend on the layout
// and rewrites those whose targets moved. Each flow keeps its cookie.
func (a *Agent) relayoutLocked(ctx context.Context) error {
	for _, owner := range a.store.Owners() {
		var changes []flowstore.Change
		var msgs []openflow.Message
		for _, e := range a.store.LayoutFlows(owner) {
			r, err := a.arb.Resolve(owner, e.R.Flow)
			if err != nil {
				a.log.Warn("flow no longer resolves after a layout change; it stays as installed", "plugin", owner, "flow", e.R.String(), "error", err)
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
			msgs = append(msgs, m)
			changes = append(changes, flowstore.Change{Kind: flow.OpAdd, Flow: &flowstore.Entry{Key: e.Key, R: r}})
		}
		if len(msgs) == 0 {
			continue
		}
		if err := a.sw.Bundle(ctx, msgs, true); err != nil {
			return fmt.Errorf("%w: re-pointing %d flows of plugin %q after a layout change: %v", sdk.ErrSwitch, len(msgs), owner, err)
		}
		a.store.Commit(&flowstore.Plan{Owner: owner, Changes: changes})
		a.log.Info("re-pointed flows after a layout change", "plugin", owner, "flows", len(msgs))
	}
	return a.syncMissFlowsLocked(ctx)
}

// removePlugin deletes everything of an unloaded plugin: its flows (by
// cookie prefix), all flows in its tables (others' too, the tables are
// gone), its groups, meters and ports, and its layout entry.
func (a *Agent) removePlugin(ctx context.Context, owner string) {
	ports, err := a.db.Ports(ctx, owner)
	if err != nil {
		a.log.Error("list ports of unloaded plugin", "plugin", owner, "error", err)
	}
	for _, p := range ports {
		if err := a.db.DeletePort(ctx, p.Name); err != nil {
			a.log.Error("delete port of unloaded plugin", "plugin", owner, "port", p.Name, "error", err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.arb.Plugin(owner)
	if !ok {
		return
	}
	msgs := []openflow.Message{&openflow.FlowMod{Command: openflow.FlowDelete, CookieMask: pipeline.CookiePrefixMask,
		Flow: openflow.Flow{Table: openflow.TableAll, Cookie: pipeline.Cookie(p.Prefix, 0, 0)}}}
	for _, tn := range p.Tables {
		t, _ := a.arb.Table(tn)
		msgs = append(msgs, &openflow.FlowMod{Command: openflow.FlowDelete, Flow: openflow.Flow{Table: t.ID}})
	}
	for _, g := range a.store.Groups(owner) {
		msgs = append(msgs, &openflow.GroupMod{Command: openflow.GroupDelete, GroupID: g.Global})
	}
	if err := a.sw.Bundle(ctx, msgs, false); err != nil {
		a.log.Error("delete flows of unloaded plugin", "plugin", owner, "error", err)
	}
	for _, m := range a.store.Meters(owner) {
		if _, err := a.sw.Request(ctx, &openflow.MeterMod{Command: openflow.MeterDelete, MeterID: m.Global}); err != nil {
			a.log.Error("delete meter of unloaded plugin", "plugin", owner, "meter", m.Global, "error", err)
		}
	}
	for _, t := range a.arb.Unregister(owner) {
		a.store.ForgetTable(t.ID)
	}
	a.store.DropOwner(owner)
	if err := a.relayoutLocked(ctx); err != nil {
		a.log.Error("re-point flows after unload", "plugin", owner, "error", err)
	}
	a.saveStateLocked()
	a.log.Info("plugin removed", "plugin", owner, "tables", len(p.Tables), "ports", len(ports))
}
