package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
)

// Inspector reads the switch's tables back (*openflow.Conn). The foreign
// sweep needs it; a switch without it is not swept.
type Inspector interface {
	DumpCookies(ctx context.Context, req openflow.FlowStatsRequest) ([]openflow.FlowCookie, error)
	GroupDesc(ctx context.Context, id uint32) ([]openflow.GroupDesc, error)
	MeterStats(ctx context.Context, id uint32) ([]openflow.MeterStats, error)
}

var _ Inspector = (*openflow.Conn)(nil)

// SweepResult counts what a foreign sweep removed from the switch.
type SweepResult struct {
	Flows, Groups, Meters int
}

// sweepIfAllSynced runs the foreign sweep once every enabled plugin is
// synced (a failed plugin keeps what it has: its current round stays).
// Plugins start one after another, so the first to sync must not sweep
// for the ones not launched yet: every enabled plugin needs a runner.
func (a *Agent) sweepIfAllSynced(ctx context.Context) {
	a.pmu.Lock()
	rs := slices.Collect(maps.Values(a.plugins))
	launched := true
	for _, p := range a.cfg.Plugins {
		if a.plugins[p.Name] == nil {
			launched = false
		}
	}
	a.pmu.Unlock()
	if !launched {
		return
	}
	for _, r := range rs {
		r.mu.Lock()
		st := r.state
		r.mu.Unlock()
		if st != StateSynced && st != StateFailed && st != StateStopped {
			return
		}
	}
	if _, err := a.SweepForeign(ctx); err != nil {
		a.log.Error("sweeping flows no plugin owns", "error", err)
	}
}

// SweepForeign removes from the switch every flow, group and meter that no
// registered owner holds now: flows of a round older than its owner's
// current one, with a cookie prefix no plugin has, or with cookie 0;
// groups and meters the store does not hold (left by an earlier agent
// incarnation or written by someone else). The host owns the bridge.
// Unswept rounds of a plugin not yet synced are left alone.
func (a *Agent) SweepForeign(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	in, ok := a.sw.(Inspector)
	if !ok {
		return res, nil
	}
	// Only cookies are read, and without the layout lock: plugins keep
	// submitting while the switch streams a large table. What the dump
	// shows is then judged against the arbiter under the lock, so a prefix
	// or round that became live meanwhile is not deleted; a flow added
	// after the dump is of a live round anyway.
	flows, err := in.DumpCookies(ctx, openflow.FlowStatsRequest{Table: openflow.TableAll})
	if err != nil {
		return res, fmt.Errorf("dump flows: %w", err)
	}
	a.lay.Lock()
	defer a.lay.Unlock()
	type owner struct {
		prefix, round uint16
		whole         bool // every flow with this prefix (no plugin has it)
	}
	gone := map[owner]int{}
	zero := 0
	a.mu.Lock()
	live := a.store.OwnerRounds()
	a.mu.Unlock()
	for _, f := range flows {
		c := f.Cookie
		if c == 0 {
			zero++
			continue
		}
		// Kept: flows the store holds under an older round (re-submitted
		// unchanged by a restarted plugin, so never rewritten) and flows
		// the switch learned for a loaded plugin.
		if live[uint32(c>>32)] || sparedBySweep(c) {
			continue
		}
		prefix, round, _ := pipeline.SplitCookie(c)
		name, known := a.arb.PluginByPrefix(prefix)
		if !known {
			gone[owner{prefix: prefix, whole: true}]++
			continue
		}
		p, _ := a.arb.Plugin(name)
		if round != p.Round && !slices.Contains(p.Unswept, round) {
			gone[owner{prefix: prefix, round: round}]++
		}
	}
	var msgs []openflow.Message
	for _, o := range slices.SortedFunc(maps.Keys(gone), func(x, y owner) int {
		return int(pipeline.Cookie(x.prefix, x.round, 0)>>32) - int(pipeline.Cookie(y.prefix, y.round, 0)>>32)
	}) {
		mask := pipeline.CookieOwnerMask
		if o.whole {
			mask = pipeline.CookiePrefixMask
		}
		msgs = append(msgs, &openflow.FlowMod{Command: openflow.FlowDelete, CookieMask: mask,
			Flow: openflow.Flow{Table: openflow.TableAll, Cookie: pipeline.Cookie(o.prefix, o.round, 0)}})
		res.Flows += gone[o]
	}
	if zero > 0 {
		msgs = append(msgs, &openflow.FlowMod{Command: openflow.FlowDelete, CookieMask: ^uint64(0),
			Flow: openflow.Flow{Table: openflow.TableAll, Cookie: 0}})
		res.Flows += zero
	}
	held := map[uint32]bool{}
	heldMeters := map[uint32]bool{}
	for _, o := range a.store.Owners() {
		for _, g := range a.store.Groups(o) {
			held[g.Global] = true
		}
		for _, m := range a.store.Meters(o) {
			heldMeters[m.Global] = true
		}
	}
	groups, err := in.GroupDesc(ctx, openflow.GroupAll)
	if err != nil {
		return res, fmt.Errorf("dump groups: %w", err)
	}
	for _, g := range groups {
		if !held[g.GroupID] && !a.notBackYet(pipeline.GroupPrefix(g.GroupID)) {
			msgs = append(msgs, &openflow.GroupMod{Command: openflow.GroupDelete, GroupID: g.GroupID})
			res.Groups++
		}
	}
	if len(msgs) > 0 {
		if err := a.sw.Bundle(ctx, msgs, true); err != nil {
			return SweepResult{}, fmt.Errorf("removing %d flows and %d groups no plugin owns: %w", res.Flows, res.Groups, err)
		}
	}
	meters, err := in.MeterStats(ctx, openflow.MeterAll)
	if err != nil {
		return res, fmt.Errorf("dump meters: %w", err)
	}
	for _, m := range meters {
		if heldMeters[m.MeterID] || a.notBackYet(pipeline.MeterPrefix(m.MeterID)) {
			continue
		}
		if _, err := a.sw.Request(ctx, &openflow.MeterMod{Command: openflow.MeterDelete, MeterID: m.MeterID}); err != nil {
			a.log.Error("sweep meter no plugin owns", "meter", m.MeterID, "error", err)
			continue
		}
		res.Meters++
	}
	a.log.Info("swept what no plugin owns", "flows", res.Flows, "cookie_zero_flows", zero, "groups", res.Groups, "meters", res.Meters)
	return res, nil
}

// notBackYet reports whether prefix belongs to a plugin of the persisted
// layout that has not registered with this agent process yet: its groups
// and meters on the switch are its earlier incarnation's, still in use by
// its flows (deleting a group or meter deletes the flows that use it), and
// the store cannot know them until the plugin submits them again. The
// caller holds a.lay.
func (a *Agent) notBackYet(prefix uint16) bool {
	name, known := a.arb.PluginByPrefix(prefix)
	if !known {
		return false
	}
	p, _ := a.arb.Plugin(name)
	return !a.bornRounds[name][p.Round]
}
