package agent

import (
	"context"
	"testing"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk/flow"
)

func TestSparedBySweep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cookie uint64
		spared bool
	}{
		{"learned by a flow", pipeline.LearnedCookie(pipeline.Cookie(3, 7, 0x42)), true},
		{"learned by a group bucket", pipeline.Cookie(3, pipeline.LearnedRound, 0), true},
		{"the learning flow", pipeline.Cookie(3, 7, 0x42), false},
		{"first round", pipeline.Cookie(3, 1, 0), false},
		{"last assignable round", pipeline.Cookie(3, pipeline.LearnedRound-1, 0xffffffff), false},
	} {
		if got := sparedBySweep(tc.cookie); got != tc.spared {
			t.Errorf("%s (%#x): spared %v, want %v", tc.name, tc.cookie, got, tc.spared)
		}
	}
}

// TestLearnedFlowsSurviveSynced: a flow the switch learned from a
// plugin's learn action (cookie: the plugin's prefix, the learner's tag,
// the learned round) is deleted by none of the sweeps of Synced: not after
// a plugin restart (stale flows by key) and not after an agent restart
// (rounds of the earlier agent by cookie). The learned flow is not in the
// store, so the test models the switch: a non-strict delete removes it iff
// its cookie matches under the mask, a strict one iff the key is its own.
func TestLearnedFlowsSurviveSynced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	start := func() (*Agent, *fakeSwitch) { return restartedAgent(t, dir) }
	learner := flow.Flow{Table: "a.val", Priority: 5, Tag: 0x42, Match: flow.Match{}.TCP4().TCPDst(80), Actions: []flow.Action{
		flow.Learn(flow.ActLearn{Table: "a.val", Priority: 200, IdleTimeout: 60, Specs: []flow.LearnSpec{
			flow.LearnMatchValue(flow.Header(flow.MatchEthType), 0x800), flow.LearnMatchPacket(flow.Header(flow.MatchIPv4Src))}})}}
	other := flow.Flow{Table: "a.val", Priority: 6, Match: flow.Match{}.InPort(1)}
	a1, sw1 := start()
	register(t, a1, "a", tVal)
	if err := a1.Apply(ctx, "a", flow.NewBatch().AddFlows(learner, other), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	p, _ := a1.arb.Plugin("a")
	// What the switch learned: priority 200, ip,nw_src=10.0.0.1 in a.val.
	tv, _ := a1.arb.Table("a.val")
	learned := openflow.Flow{Table: tv.ID, Priority: 200, Cookie: pipeline.LearnedCookie(pipeline.Cookie(p.Prefix, p.Round, 0x42)),
		Match: openflow.Match{openflow.Exact(openflow.FieldEthType, 0x800), openflow.Exact(openflow.FieldIPv4Src, 0x0a000001)}}
	// The learn action asks for exactly that cookie.
	sw1.mu.Lock()
	var asked uint64
	for _, m := range sw1.bundles[len(sw1.bundles)-1] {
		if fm, ok := m.(*openflow.FlowMod); ok && fm.Flow.Priority == 5 {
			asked = fm.Flow.Instructions[0].(openflow.ApplyActions).Actions[0].(openflow.Learn).Cookie
		}
	}
	sw1.mu.Unlock()
	if asked != learned.Cookie {
		t.Fatalf("learn action asks for cookie %#x, want %#x", asked, learned.Cookie)
	}
	// deletes checks the bundles sent since bundle from, and counts their
	// deletes.
	deletes := func(sw *fakeSwitch, from int) (n int) {
		sw.mu.Lock()
		defer sw.mu.Unlock()
		for _, b := range sw.bundles[from:] {
			for _, m := range b {
				fm, ok := m.(*openflow.FlowMod)
				if !ok {
					continue
				}
				tableOK := fm.Flow.Table == openflow.TableAll || fm.Flow.Table == learned.Table
				switch fm.Command {
				case openflow.FlowDelete:
					n++
					if tableOK && learned.Cookie&fm.CookieMask == fm.Flow.Cookie&fm.CookieMask {
						t.Errorf("sweep %s deletes the learned flow %s", fm.Flow.String(), learned.String())
					}
				case openflow.FlowDeleteStrict:
					n++
					if tableOK && fm.Flow.Priority == learned.Priority && fm.Flow.Match.String() == learned.Match.String() {
						t.Errorf("sweep %s deletes the learned flow %s", fm.Flow.String(), learned.String())
					}
				}
			}
		}
		return n
	}

	// The agent restarts: rounds of the earlier agent go by cookie.
	a2, sw2 := start()
	register(t, a2, "a", tVal)
	if err := a2.Apply(ctx, "a", flow.NewBatch().AddFlows(learner, other), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a2.Synced(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if deletes(sw2, 0) == 0 {
		t.Error("the agent-restart sweep sent no delete: the test checks nothing")
	}
	// The switch learned more under the re-installed learner's cookie.
	p, _ = a2.arb.Plugin("a")
	learned.Cookie = pipeline.LearnedCookie(pipeline.Cookie(p.Prefix, p.Round, 0x42))
	// The plugin restarts: a new round of this agent, a smaller batch.
	sw2.mu.Lock()
	before := len(sw2.bundles)
	sw2.mu.Unlock()
	register(t, a2, "a", tVal)
	if err := a2.Apply(ctx, "a", flow.NewBatch().AddFlows(learner), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	if n, err := a2.Synced(ctx, "a"); err != nil || n != 1 {
		t.Fatalf("synced after a plugin restart: %d stale, %v; want 1 (the flow not re-submitted)", n, err)
	}
	if deletes(sw2, before) == 0 {
		t.Error("the plugin-restart sweep sent no delete: the test checks nothing")
	}
}
