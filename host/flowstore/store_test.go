package flowstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/flow/flowtest"
)

func layout(t *testing.T) *pipeline.Arbiter {
	t.Helper()
	a := pipeline.New()
	for _, n := range []string{"a", "b"} {
		if _, err := a.Register(n, []sdk.Table{{Name: n + ".t", Pipeline: flow.PipelineIP, Stage: flow.StageRouting, Exported: true}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func resolved(t *testing.T, a *pipeline.Arbiter, owner, table string, prio uint16, port uint32) *pipeline.Resolved {
	t.Helper()
	r, err := a.Resolve(owner, &flow.Flow{Table: table, Priority: prio, Match: flow.Match{}.InPort(port)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPlanCommit(t *testing.T) {
	a := layout(t)
	s := New()
	add := func(owner, table string, prio uint16, port uint32) Op {
		return Op{Kind: flow.OpAdd, Flow: resolved(t, a, owner, table, prio, port)}
	}
	del := func(owner, table string, prio uint16, port uint32) Op {
		return Op{Kind: flow.OpDelete, Flow: resolved(t, a, owner, table, prio, port)}
	}
	cases := []struct {
		name      string
		owner     string
		ops       []Op
		limit     int
		wantErr   error
		errText   string
		wantCount map[string]int
	}{
		{name: "a installs three", owner: "a", ops: []Op{add("a", "a.t", 1, 1), add("a", "a.t", 1, 2), add("a", "b.t", 1, 1)}, wantCount: map[string]int{"a": 3}},
		{name: "re-adding own key replaces", owner: "a", ops: []Op{add("a", "a.t", 1, 1)}, wantCount: map[string]int{"a": 3}},
		{name: "b on a's key conflicts naming both", owner: "b", ops: []Op{add("b", "b.t", 2, 9), add("b", "a.t", 1, 2)},
			wantErr: sdk.ErrConflict, errText: `plugin "b" cannot install flow table=90, priority=1, in_port=2 (op 1): plugin "a" already holds`, wantCount: map[string]int{"a": 3}},
		{name: "b cannot delete a's flow", owner: "b", ops: []Op{del("b", "a.t", 1, 1)}, wantErr: sdk.ErrConflict, wantCount: map[string]int{"a": 3}},
		{name: "limit counts adds and deletes in the batch", owner: "a", limit: 3,
			ops: []Op{add("a", "a.t", 5, 5), del("a", "a.t", 1, 1), add("a", "a.t", 5, 5)}, wantCount: map[string]int{"a": 3}},
		{name: "over the limit is refused", owner: "a", limit: 3, ops: []Op{add("a", "a.t", 6, 6)},
			wantErr: sdk.ErrLimit, errText: `plugin "a" would hold 4 flows, over its limit of 3`, wantCount: map[string]int{"a": 3}},
		{name: "deleting a missing key is a no-op", owner: "b", ops: []Op{del("b", "b.t", 9, 9)}, wantCount: map[string]int{"a": 3, "b": 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.Plan(tc.owner, tc.ops, tc.limit)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("err = %v, want %v containing %q", err, tc.wantErr, tc.errText)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				s.Commit(p)
			}
			got := map[string]int{}
			for n := range tc.wantCount {
				got[n] = s.Count(n)
			}
			if diff := cmp.Diff(tc.wantCount, got); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStaleAfterRestart(t *testing.T) {
	a := layout(t)
	s := New()
	p, _ := s.Plan("a", []Op{
		{Kind: flow.OpAdd, Flow: resolved(t, a, "a", "a.t", 1, 1)},
		{Kind: flow.OpAdd, Flow: resolved(t, a, "a", "a.t", 1, 2)},
	}, 0)
	s.Commit(p)
	// Plugin a restarts: new round, re-installs only in_port=2.
	if _, err := a.Register("a", []sdk.Table{{Name: "a.t", Pipeline: flow.PipelineIP, Stage: flow.StageRouting, Exported: true}}, nil); err != nil {
		t.Fatal(err)
	}
	p, _ = s.Plan("a", []Op{{Kind: flow.OpAdd, Flow: resolved(t, a, "a", "a.t", 1, 2)}}, 0)
	s.Commit(p)
	stale := s.Stale("a", 2)
	if len(stale) != 1 || stale[0].Key.Match != "in_port=1" {
		t.Fatalf("stale = %v, want only in_port=1", stale)
	}
	s.Forget("a", stale)
	if s.Count("a") != 1 || s.Total() != 1 {
		t.Errorf("after forget: count %d total %d, want 1/1", s.Count("a"), s.Total())
	}
}

// TestCompactFormRebuildsTheSameFlow: what the store hands back (Get,
// Flows, LayoutFlows) prints exactly as the resolved flow it was given,
// register fields, jumps and cookie included.
func TestCompactFormRebuildsTheSameFlow(t *testing.T) {
	a := pipeline.New()
	mark := flow.Field{Name: "a.mark", Width: 4}
	if _, err := a.Register("a", []sdk.Table{
		{Name: "a.t", Pipeline: flow.PipelineIP, Stage: flow.StageRouting},
		{Name: "a.u", Pipeline: flow.PipelineIP, Stage: flow.StageOutput},
	}, []flow.Field{mark}, flowtest.Resources()...); err != nil {
		t.Fatal(err)
	}
	flows := []*flow.Flow{
		{Table: "a.t", Priority: 7, Match: flow.Match{}.IPv4().Field(mark, 3).Field(flow.FieldPacketSource, 1),
			Actions: []flow.Action{flow.LoadField(mark, 5), flow.Conntrack(flow.CT{Zone: 5, Resume: flow.GotoStage(flow.StageOutput)})},
			Goto:    flow.NextTable(), Tag: 9},
		{Table: "a.u", Priority: 1, Match: flow.Match{}.InPort(4), Actions: []flow.Action{flow.Output(2)}},
	}
	var ops []Op
	want := map[pipeline.Key]string{}
	for _, f := range flows {
		r, err := a.Resolve("a", f)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, Op{Kind: flow.OpAdd, Flow: r})
		want[r.Key()] = r.String()
	}
	s := New()
	p, err := s.Plan("a", ops, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.Commit(p)
	got := map[pipeline.Key]string{}
	for _, e := range s.Flows("a") {
		got[e.Key] = e.R.String()
		if g, ok := s.Get(e.Key); !ok || g.R.String() != e.R.String() {
			t.Errorf("Get(%s) = %v, %v; want the flow Flows lists", e.Key, g, ok)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flows (-resolved +stored):\n%s", diff)
	}
	if l := s.LayoutFlows("a"); len(l) != 1 || l[0].R.Flow.Table != "a.t" {
		t.Errorf("LayoutFlows = %v, want only the a.t flow (it names the next table)", l)
	}
	if c := s.CountByTable(); len(c) != 2 {
		t.Errorf("CountByTable = %v, want one flow in each of two tables", c)
	}
}

// TestRefreshOfUnchangedFlows: a restarted plugin re-submitting a flow
// unchanged is a refresh (nothing to send; the flow is no longer stale),
// a changed one is a real add.
func TestRefreshOfUnchangedFlows(t *testing.T) {
	a := layout(t)
	s := New()
	s.KnownRound = func(owner string, round uint16) bool { return owner == "a" && round == 1 }
	mk := func(port, out uint32) *pipeline.Resolved {
		r, err := a.Resolve("a", &flow.Flow{Table: "a.t", Priority: 1, Match: flow.Match{}.InPort(port), Actions: []flow.Action{flow.Output(out)}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	p, _ := s.Plan("a", []Op{{Kind: flow.OpAdd, Flow: mk(1, 7)}, {Kind: flow.OpAdd, Flow: mk(2, 7)}, {Kind: flow.OpAdd, Flow: mk(3, 7)}}, 0)
	s.Commit(p)
	if _, err := a.Register("a", []sdk.Table{{Name: "a.t", Pipeline: flow.PipelineIP, Stage: flow.StageRouting, Exported: true}}, nil); err != nil {
		t.Fatal(err)
	}
	p, err := s.Plan("a", []Op{{Kind: flow.OpAdd, Flow: mk(1, 7)}, {Kind: flow.OpAdd, Flow: mk(2, 8)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var refresh []bool
	for _, c := range p.Changes {
		refresh = append(refresh, c.Refresh)
	}
	if diff := cmp.Diff([]bool{true, false}, refresh); diff != "" {
		t.Errorf("refresh per change (-want +got):\n%s", diff)
	}
	s.Commit(p)
	var stale []string
	for _, e := range s.Stale("a", 2) {
		stale = append(stale, e.Key.Match)
	}
	if diff := cmp.Diff([]string{"in_port=3"}, stale); diff != "" {
		t.Errorf("stale after round 2 (-want +got):\n%s", diff)
	}
	// The refreshed flow keeps its round-1 cookie (that is what the
	// switch holds); the changed one carries round 2's.
	for _, e := range s.Flows("a") {
		_, round, _ := pipeline.SplitCookie(e.R.Cookie)
		want := map[string]uint16{"in_port=1": 1, "in_port=2": 2, "in_port=3": 1}[e.Key.Match]
		if round != want {
			t.Errorf("%s: cookie round %d, want %d", e.Key.Match, round, want)
		}
	}
}
func TestTagged(t *testing.T) {
	s := New()
	mk := func(owner string, table uint8, prio uint16, tag uint32) *pipeline.Resolved {
		return &pipeline.Resolved{Owner: owner, Flow: &flow.Flow{Table: "t", Priority: prio}, TableID: table, Cookie: pipeline.Cookie(1, 1, tag)}
	}
	var ops []Op
	for i, tag := range []uint32{0x100, 0x101, 0x200, 0x100} {
		ops = append(ops, Op{Kind: flow.OpAdd, Flow: mk("a", uint8(i%2), uint16(i), tag)})
	}
	p, err := s.Plan("a", ops, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.Commit(p)
	pb, _ := s.Plan("b", []Op{{Kind: flow.OpAdd, Flow: mk("b", 0, 9, 0x100)}}, 0)
	s.Commit(pb)
	for _, tc := range []struct {
		table     int
		tag, mask uint32
		want      int
	}{
		{AllTables, 0x100, 0xffffffff, 2},
		{AllTables, 0x100, 0xff00, 3},
		{0, 0x100, 0xff00, 1},
		{1, 0x100, 0xffffffff, 1},
		{AllTables, 0, 0, 4},
		{AllTables, 0x300, 0xffffffff, 0},
	} {
		got := s.Tagged("a", tc.table, tc.tag, tc.mask)
		if len(got) != tc.want {
			t.Errorf("Tagged(a, %d, %#x/%#x) = %d flows, want %d", tc.table, tc.tag, tc.mask, len(got), tc.want)
		}
		for _, e := range got {
			if e.R.Owner != "a" {
				t.Errorf("Tagged returned a flow of %q", e.R.Owner)
			}
		}
	}
	if e, ok := s.Lookup(mk("a", 0, 0, 0).Key()); !ok || e.R.Owner != "a" {
		t.Errorf("Lookup = %v, %v", e, ok)
	}
}

// TestReAddAfterRestartModifies: a restarted plugin (new round) that adds
// a group or meter its earlier incarnation installed gets a modify (the
// switch holds it; an add would be refused), recorded under the new round
// so it is not stale. An add in the same round stays an add.
func TestReAddAfterRestartModifies(t *testing.T) {
	s := New()
	g := &flow.Group{ID: 3, Type: flow.GroupSelect}
	m := &flow.Meter{ID: 1, Unit: flow.MeterPktps, Bands: []flow.MeterBand{{Rate: 10}}}
	plan := func(round uint16, kind flow.OpKind) *Plan {
		p, err := s.Plan("a", []Op{{Kind: kind, Group: g, Prefix: 1, Round: round}, {Kind: kind, Meter: m, Prefix: 1, Round: round}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	kinds := func(p *Plan) []flow.OpKind { return []flow.OpKind{p.Changes[0].Kind, p.Changes[1].Kind} }
	first := plan(1, flow.OpAdd)
	if got := kinds(first); got[0] != flow.OpAdd || got[1] != flow.OpAdd {
		t.Fatalf("first add planned as %v", got)
	}
	s.Commit(first)
	if got := kinds(plan(1, flow.OpAdd)); got[0] != flow.OpAdd || got[1] != flow.OpAdd {
		t.Errorf("a second add in the same round planned as %v, want adds (the switch refuses them: a plugin bug)", got)
	}
	again := plan(2, flow.OpAdd)
	if got := kinds(again); got[0] != flow.OpModify || got[1] != flow.OpModify {
		t.Fatalf("re-add after a restart planned as %v, want modifies", got)
	}
	s.Commit(again)
	if gs, ms := s.StaleObjects("a", 2); len(gs)+len(ms) != 0 {
		t.Errorf("stale after the re-add: %d groups, %d meters, want none", len(gs), len(ms))
	}
}
