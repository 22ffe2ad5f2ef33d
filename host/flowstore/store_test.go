package flowstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
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
