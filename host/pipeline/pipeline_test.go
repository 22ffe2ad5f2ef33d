package pipeline

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

func TestRangesWellFormed(t *testing.T) {
	seen := map[[2]uint8]bool{}
	for i, r := range Ranges {
		if r.First > r.Last {
			t.Errorf("range %d (%s/%s): First %d > Last %d", i, r.Pipeline, r.Stage, r.First, r.Last)
		}
		if r.Last >= 254 {
			t.Errorf("range %d (%s/%s) uses reserved IDs", i, r.Pipeline, r.Stage)
		}
		if i > 0 {
			prev := Ranges[i-1]
			if r.First <= prev.Last {
				t.Errorf("range %s/%s [%d-%d] overlaps or precedes %s/%s [%d-%d]", r.Pipeline, r.Stage, r.First, r.Last, prev.Pipeline, prev.Stage, prev.First, prev.Last)
			}
			if r.Pipeline == prev.Pipeline && r.Stage <= prev.Stage {
				t.Errorf("pipeline %s: stage %s comes after %s but is not later", r.Pipeline, r.Stage, prev.Stage)
			}
			if r.Pipeline < prev.Pipeline {
				t.Errorf("pipeline %s laid out after %s", r.Pipeline, prev.Pipeline)
			}
		}
		k := [2]uint8{uint8(r.Pipeline), uint8(r.Stage)}
		if seen[k] {
			t.Errorf("stage %s/%s declared twice", r.Pipeline, r.Stage)
		}
		seen[k] = true
	}
	if Ranges[0].First != 0 || Ranges[0].Pipeline != flow.PipelineRoot {
		t.Errorf("table 0 must be the root classifier, got %+v", Ranges[0])
	}
}

type reg struct {
	name   string
	tables []sdk.Table
	fields []flow.Field
}

func tbl(name string, p flow.Pipeline, s flow.Stage, exported bool) sdk.Table {
	return sdk.Table{Name: name, Pipeline: p, Stage: s, Exported: exported}
}

type idRow struct {
	Name, Owner string
	ID          uint8
}

func layoutIDs(a *Arbiter) []idRow {
	var out []idRow
	for _, t := range a.Layout() {
		out = append(out, idRow{t.Name, t.Owner, t.ID})
	}
	return out
}

func TestRegisterLayout(t *testing.T) {
	cases := []struct {
		name    string
		regs    []reg
		want    []idRow
		wantErr error
		errText []string // substrings the last registration's error must contain
	}{
		{
			name: "two plugins fill their stages in declaration order",
			regs: []reg{
				{name: "a", tables: []sdk.Table{tbl("a.class", flow.PipelineRoot, flow.StageClassifier, false), tbl("a.route", flow.PipelineIP, flow.StageRouting, true), tbl("a.route2", flow.PipelineIP, flow.StageRouting, false)}},
				{name: "b", tables: []sdk.Table{tbl("b.out", flow.PipelineIP, flow.StageOutput, false), tbl("b.route", flow.PipelineIP, flow.StageRouting, false)}},
			},
			want: []idRow{{"a.class", "a", 0}, {"a.route", "a", 90}, {"a.route2", "a", 91}, {"b.route", "b", 92}, {"b.out", "b", 200}},
		},
		{
			name: "hot-loaded plugin fits between existing tables without renumbering",
			regs: []reg{
				{name: "a", tables: []sdk.Table{tbl("a.class", flow.PipelineRoot, flow.StageClassifier, false), tbl("a.out", flow.PipelineIP, flow.StageOutput, false)}},
				{name: "c", tables: []sdk.Table{tbl("c.pol", flow.PipelineIP, flow.StageEgressSecurity, false), tbl("c.arp", flow.PipelineARP, flow.StageValidation, false)}},
			},
			want: []idRow{{"a.class", "a", 0}, {"c.arp", "c", 10}, {"c.pol", "c", 70}, {"a.out", "a", 200}},
		},
		{
			name: "table name taken by another plugin is a conflict naming both",
			regs: []reg{
				{name: "a", tables: []sdk.Table{tbl("shared", flow.PipelineIP, flow.StageRouting, false)}},
				{name: "b", tables: []sdk.Table{tbl("shared", flow.PipelineIP, flow.StageOutput, false)}},
			},
			want:    []idRow{{"shared", "a", 90}},
			wantErr: sdk.ErrConflict,
			errText: []string{`plugin "b"`, `table "shared" is already declared by plugin "a"`},
		},
		{
			name: "stage missing from pipeline lists the stages it has",
			regs: []reg{
				{name: "a", tables: []sdk.Table{tbl("x", flow.PipelineARP, flow.StageRouting, false)}},
			},
			wantErr: sdk.ErrInvalid,
			errText: []string{"pipeline arp has no stage Routing", "Validation Output"},
		},
		{
			name: "every error is listed and nothing is assigned",
			regs: []reg{
				{name: "a", tables: []sdk.Table{tbl("ok", flow.PipelineIP, flow.StageRouting, false), tbl("", flow.PipelineIP, flow.StageRouting, false), tbl("ok", flow.PipelineIP, flow.StageOutput, false)},
					fields: []flow.Field{{Name: "sdk.mine", Width: 3}, {Name: "wide", Width: 40}}},
			},
			wantErr: sdk.ErrInvalid,
			errText: []string{"empty name", `"ok" declared twice`, "sdk. prefix is reserved", "width 40 out of range"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := New()
			var err error
			for _, r := range tc.regs {
				_, err = a.Register(r.name, r.tables, r.fields)
			}
			if tc.wantErr == nil && err != nil {
				t.Fatalf("Register: %v", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Register error = %v, want %v", err, tc.wantErr)
			}
			for _, s := range tc.errText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if diff := cmp.Diff(tc.want, layoutIDs(a)); diff != "" {
				t.Errorf("layout (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStageFull(t *testing.T) {
	a := New()
	var tables []sdk.Table
	for i := range 8 {
		tables = append(tables, tbl("c"+string(rune('a'+i)), flow.PipelineRoot, flow.StageClassifier, false))
	}
	if _, err := a.Register("a", tables, nil); err != nil {
		t.Fatal(err)
	}
	_, err := a.Register("b", []sdk.Table{tbl("one-too-many", flow.PipelineRoot, flow.StageClassifier, false)}, nil)
	if !errors.Is(err, sdk.ErrLimit) || !strings.Contains(err.Error(), "stage root/Classifier is full (table IDs 0-7") {
		t.Fatalf("err = %v, want stage-full ErrLimit", err)
	}
}

func TestReregisterKeepsIDsBitsPrefixAndBumpsRound(t *testing.T) {
	a := New()
	tables := []sdk.Table{tbl("a.class", flow.PipelineRoot, flow.StageClassifier, false), tbl("a.route", flow.PipelineIP, flow.StageRouting, false)}
	fields := []flow.Field{{Name: "mark", Width: 8}, {Name: "flag", Width: 1}}
	p1, err := a.Register("a", tables, fields)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register("b", []sdk.Table{tbl("b.route", flow.PipelineIP, flow.StageRouting, false)}, []flow.Field{{Name: "x", Width: 16}}); err != nil {
		t.Fatal(err)
	}
	// Restart of a: declares one table fewer and a new one in the same stage.
	p2, err := a.Register("a", []sdk.Table{tables[1], tbl("a.route.new", flow.PipelineIP, flow.StageRouting, false)}, fields)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Prefix != p1.Prefix || p2.Round != p1.Round+1 {
		t.Errorf("prefix/round = %d/%d, want %d/%d", p2.Prefix, p2.Round, p1.Prefix, p1.Round+1)
	}
	if diff := cmp.Diff([]uint16{1}, p2.Unswept); diff != "" {
		t.Errorf("unswept rounds (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(p1.Bits, p2.Bits); diff != "" {
		t.Errorf("bits changed across restart (-before +after):\n%s", diff)
	}
	want := []idRow{{"a.route", "a", 90}, {"b.route", "b", 91}, {"a.route.new", "a", 92}}
	if diff := cmp.Diff(want, layoutIDs(a)); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
}

func TestFieldAllocation(t *testing.T) {
	a := New()
	pa, err := a.Register("a", nil, []flow.Field{{Name: "f27", Width: 27}, {Name: "f32", Width: 32}, {Name: "f1", Width: 1}})
	if err != nil {
		t.Fatal(err)
	}
	pb, err := a.Register("b", nil, []flow.Field{{Name: "f27", Width: 27}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]flow.Bits{
		"f27": {Reg: 0, Offset: 5, Width: 27}, // reg0[0..4] are well-known
		"f32": {Reg: 2, Offset: 0, Width: 32}, // reg1 is sdk.target_ofport
		"f1":  {Reg: 3, Offset: 0, Width: 1},
	}
	if diff := cmp.Diff(want, pa.Bits); diff != "" {
		t.Errorf("a bits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]flow.Bits{"f27": {Reg: 3, Offset: 1, Width: 27}}, pb.Bits); diff != "" {
		t.Errorf("b bits (-want +got):\n%s", diff)
	}
	a.Unregister("a")
	pc, err := a.Register("c", nil, []flow.Field{{Name: "g", Width: 20}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]flow.Bits{"g": {Reg: 0, Offset: 5, Width: 20}}, pc.Bits); diff != "" {
		t.Errorf("freed bits not reused (-want +got):\n%s", diff)
	}
	// Exhaust: 13 more full registers fit (reg2, reg4..reg15), the next does not.
	var many []flow.Field
	for i := range 14 {
		many = append(many, flow.Field{Name: "w" + string(rune('a'+i)), Width: 32})
	}
	if _, err := a.Register("d", nil, many); !errors.Is(err, sdk.ErrLimit) {
		t.Errorf("exhausting registers: err = %v, want ErrLimit", err)
	}
	if _, ok := a.Plugin("d"); ok {
		t.Errorf("failed registration left plugin d behind")
	}
}

// twoPlugins builds the layout the resolve tests use:
//
//	a: a.class (root/Classifier, 0), a.route (ip/Routing, 90, exported), a.priv (ip/Switching, 130)
//	b: b.val (ip/Validation, 30), b.out (ip/Output, 200)
func twoPlugins(t *testing.T) *Arbiter {
	t.Helper()
	a := New()
	if _, err := a.Register("a", []sdk.Table{
		tbl("a.class", flow.PipelineRoot, flow.StageClassifier, false),
		tbl("a.route", flow.PipelineIP, flow.StageRouting, true),
		tbl("a.priv", flow.PipelineIP, flow.StageSwitching, false),
	}, []flow.Field{{Name: "mark", Width: 8}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register("b", []sdk.Table{
		tbl("b.val", flow.PipelineIP, flow.StageValidation, false),
		tbl("b.out", flow.PipelineIP, flow.StageOutput, false),
	}, nil); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestResolve(t *testing.T) {
	mark := flow.Field{Name: "mark", Width: 8}
	cases := []struct {
		name    string
		owner   string
		flow    flow.Flow
		want    string // resolved text
		wantErr error
		errText []string
	}{
		{
			name:  "classifier hands to the IP pipeline and sets well-known field",
			owner: "a",
			flow: flow.Flow{Table: "a.class", Priority: 100, Match: flow.Match{}.InPort(3).IPv4(),
				Actions: []flow.Action{flow.LoadField(flow.FieldPacketSource, flow.PacketSourceLocal)}, Goto: flow.GotoPipeline(flow.PipelineIP, flow.StageValidation)},
			want: "cookie=0x1000100000000, priority=100,ip,in_port=3 actions=set_field:0x1/0xf->reg0,goto_table:30",
		},
		{
			name:  "next table crosses plugins",
			owner: "b",
			flow:  flow.Flow{Table: "b.val", Priority: 10, Match: flow.Match{}.IPv4().IPv4Src(netip.MustParseAddr("10.0.0.1")), Goto: flow.NextTable(), Tag: 7},
			want:  "cookie=0x2000100000007, table=30, priority=10,ip,nw_src=10.0.0.1 actions=goto_table:90",
		},
		{
			name:  "goto stage picks the first table at or after it",
			owner: "b",
			flow:  flow.Flow{Table: "b.val", Priority: 10, Goto: flow.GotoStage(flow.StagePostRouting)},
			want:  "cookie=0x2000100000000, table=30, priority=10 actions=goto_table:130",
		},
		{
			name:  "private register field resolves to allocated bits, in match and action",
			owner: "a",
			flow: flow.Flow{Table: "a.route", Priority: 5, Match: flow.Match{}.Field(mark, 0x2a),
				Actions: []flow.Action{flow.LoadField(mark, 1), flow.Conntrack(flow.CT{Commit: true, Resume: flow.GotoTable("b.out")})}, Goto: flow.GotoTable("a.priv")},
			want: "cookie=0x1000100000000, table=90, priority=5,reg0=0x540/0x1fe0 actions=set_field:0x20/0x1fe0->reg0,ct(commit,table=200),goto_table:130",
		},
		{
			name:  "writing into an exported table is allowed",
			owner: "b",
			flow:  flow.Flow{Table: "a.route", Priority: 50, Actions: []flow.Action{flow.Output(4)}},
			want:  "cookie=0x2000100000000, table=90, priority=50 actions=output:4",
		},
		{
			name:    "writing into another plugin's private table is refused naming both",
			owner:   "b",
			flow:    flow.Flow{Table: "a.priv", Priority: 50},
			wantErr: sdk.ErrNotOwner,
			errText: []string{`plugin "b" may not write into table "a.priv" (ID 130): it is private to plugin "a"`},
		},
		{
			name:    "unknown table",
			owner:   "a",
			flow:    flow.Flow{Table: "nope", Priority: 1},
			wantErr: sdk.ErrUnknownTable,
			errText: []string{`no table named "nope"`},
		},
		{
			name:    "backward goto is refused",
			owner:   "b",
			flow:    flow.Flow{Table: "b.out", Priority: 1, Goto: flow.GotoTable("a.route")},
			wantErr: sdk.ErrBackwardJump,
			errText: []string{`table "b.out" (ID 200) jumps @a.route to table "a.route" (ID 90)`},
		},
		{
			name:    "goto own stage from its first table is backward (a loop)",
			owner:   "b",
			flow:    flow.Flow{Table: "b.val", Priority: 1, Goto: flow.GotoStage(flow.StageValidation)},
			wantErr: sdk.ErrBackwardJump,
		},
		{
			name:    "backward ct resume is refused",
			owner:   "a",
			flow:    flow.Flow{Table: "a.priv", Priority: 1, Actions: []flow.Action{flow.Conntrack(flow.CT{Resume: flow.GotoTable("a.route")})}},
			wantErr: sdk.ErrBackwardJump,
		},
		{
			name:    "next table after the last table of the pipeline",
			owner:   "b",
			flow:    flow.Flow{Table: "b.out", Priority: 1, Goto: flow.NextTable()},
			wantErr: sdk.ErrUnknownTable,
			errText: []string{"last table of pipeline ip"},
		},
		{
			name:    "another plugin's field is unallocated for this one",
			owner:   "b",
			flow:    flow.Flow{Table: "b.val", Priority: 1, Match: flow.Match{}.Field(mark, 1)},
			wantErr: sdk.ErrUnallocatedField,
			errText: []string{`plugin "b"`, `register field "mark"`, "did not request"},
		},
		{
			name:    "output port written outside the switching stage",
			owner:   "a",
			flow:    flow.Flow{Table: "a.route", Priority: 1, Actions: []flow.Action{flow.LoadField(flow.FieldTargetPort, 3)}},
			wantErr: sdk.ErrNotOwner,
			errText: []string{`plugin "a": flow in table "a.route" (stage Routing) writes well-known field "sdk.target_ofport", which only tables of stage Switching may write`},
		},
		{
			name:    "packet source written outside the classifier",
			owner:   "b",
			flow:    flow.Flow{Table: "b.val", Priority: 1, Actions: []flow.Action{flow.LoadField(flow.FieldPacketSource, flow.PacketSourceTunnel)}},
			wantErr: sdk.ErrNotOwner,
			errText: []string{`writes well-known field "sdk.pkt_source", which only tables of stage Classifier may write`},
		},
		{
			name:    "field used with the wrong width",
			owner:   "a",
			flow:    flow.Flow{Table: "a.route", Priority: 1, Actions: []flow.Action{flow.LoadField(flow.Field{Name: "mark", Width: 4}, 1)}},
			wantErr: sdk.ErrUnallocatedField,
			errText: []string{"requested with 8 bits but is used with 4"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := twoPlugins(t)
			f := tc.flow
			r, err := a.Resolve(tc.owner, &f)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				for _, s := range tc.errText {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if diff := cmp.Diff(tc.want, r.String()); diff != "" {
				t.Errorf("resolved text (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHotLoadChangesNextTable(t *testing.T) {
	a := twoPlugins(t)
	f := flow.Flow{Table: "b.val", Priority: 1, Goto: flow.NextTable()}
	r1, err := a.Resolve("b", &f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register("c", []sdk.Table{tbl("c.ct", flow.PipelineIP, flow.StageConntrackState, false)}, nil); err != nil {
		t.Fatal(err)
	}
	r2, err := a.Resolve("b", &f)
	if err != nil {
		t.Fatal(err)
	}
	if !r1.Layout || r1.Goto != 90 || r2.Goto != 40 {
		t.Errorf("next table before/after hot-load = %d/%d (layout-dependent %v), want 90/40", r1.Goto, r2.Goto, r1.Layout)
	}
}

func TestMissFlows(t *testing.T) {
	a := New()
	if _, err := a.Register("a", []sdk.Table{
		{Name: "c", Pipeline: flow.PipelineIP, Stage: flow.StageValidation, Miss: sdk.MissNext},
		{Name: "d", Pipeline: flow.PipelineIP, Stage: flow.StageRouting, Miss: sdk.MissController},
		{Name: "e", Pipeline: flow.PipelineIP, Stage: flow.StageOutput, Miss: sdk.MissNext},
		{Name: "f", Pipeline: flow.PipelineARP, Stage: flow.StageOutput, Miss: sdk.MissDrop},
	}, nil); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range []string{"c", "d", "e", "f"} {
		r, err := a.MissFlow(n)
		if err != nil {
			t.Fatal(err)
		}
		if r != nil {
			got[n] = r.String()
		}
	}
	want := map[string]string{
		"c": "cookie=0x1000100000000, table=30, priority=0 actions=goto_table:90",
		"d": "cookie=0x1000100000000, table=90, priority=0 actions=CONTROLLER:65535",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("miss flows (-want +got):\n%s", diff)
	}
}

func TestSnapshotRestore(t *testing.T) {
	a := twoPlugins(t)
	b, err := Restore(a.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a.Snapshot(), b.Snapshot()); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// The restored plugin keeps its layout and gets the next round.
	p, err := b.Register("a", []sdk.Table{
		tbl("a.class", flow.PipelineRoot, flow.StageClassifier, false),
		tbl("a.route", flow.PipelineIP, flow.StageRouting, true),
		tbl("a.priv", flow.PipelineIP, flow.StageSwitching, false),
	}, []flow.Field{{Name: "mark", Width: 8}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Round != 2 || p.Prefix != 1 {
		t.Errorf("restored plugin a: prefix %d round %d, want 1 and 2", p.Prefix, p.Round)
	}
	bad := a.Snapshot()
	bad.Plugins[1].Tables[0].ID = 5 // b.val is ip/Validation, 30-39
	if _, err := Restore(bad); err == nil || !strings.Contains(err.Error(), `table "b.val" ID 5 is outside stage ip/Validation`) {
		t.Errorf("corrupt state accepted or wrong error: %v", err)
	}
}

func TestCookie(t *testing.T) {
	c := Cookie(3, 7, 0xdeadbeef)
	p, r, tag := SplitCookie(c)
	if c != 0x0003_0007_dead_beef || p != 3 || r != 7 || tag != 0xdeadbeef {
		t.Errorf("Cookie(3,7,0xdeadbeef) = %#x -> %d/%d/%#x", c, p, r, tag)
	}
}

// Tables of one stage can be ordered by name; the host honours the order,
// also against tables declared before or after, or refuses naming both.
func TestTableOrder(t *testing.T) {
	eg := func(name string, after, before []string) sdk.Table {
		return sdk.Table{Name: name, Pipeline: flow.PipelineIP, Stage: flow.StageEgressSecurity, After: after, Before: before}
	}
	base := func(t *testing.T) *Arbiter {
		a := New()
		if _, err := a.Register("a", []sdk.Table{eg("x1", nil, nil), eg("x2", nil, nil), eg("x3", nil, nil)}, nil); err != nil {
			t.Fatal(err)
		}
		// x2 goes: ID 71 is free between x1 (70) and x3 (72).
		if _, err := a.Register("a", []sdk.Table{eg("x1", nil, nil), eg("x3", nil, nil)}, nil); err != nil {
			t.Fatal(err)
		}
		return a
	}
	cases := []struct {
		name    string
		tables  []sdk.Table
		wantIDs map[string]uint8
		wantErr error
		errText string
	}{
		{"honoured: after, and between two", []sdk.Table{eg("w", []string{"x3"}, nil), eg("y", []string{"x1"}, []string{"x3"})},
			map[string]uint8{"w": 73, "y": 71}, nil, ""},
		{"no free ID between", []sdk.Table{eg("y", []string{"x1"}, []string{"x3"}), eg("z", []string{"x1"}, []string{"x3"})}, nil,
			sdk.ErrConflict, `table "z" must come after table "x1" (ID 70) and before table "x3" (ID 72) in stage ip/EgressSecurity, but no free table ID lies there`},
		{"before the first table of the stage", []sdk.Table{eg("y", nil, []string{"x1"})}, nil,
			sdk.ErrConflict, `table "y" must come before table "x1" (plugin "a"), which holds ID 70, the first of stage ip/EgressSecurity`},
		{"contradiction", []sdk.Table{eg("y", []string{"x3"}, []string{"x3"})}, nil,
			sdk.ErrConflict, `table "y" must come both before and after table "x3" (plugin "a")`},
		{"another stage", []sdk.Table{{Name: "v", Pipeline: flow.PipelineIP, Stage: flow.StageValidation, After: []string{"x1"}}}, nil,
			sdk.ErrInvalid, `table "v" (ip/Validation) declares an order against table "x1" of plugin "a", which is in ip/EgressSecurity`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := base(t)
			_, err := a.Register("b", tc.tables, nil)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("err = %v, want %v containing %q", err, tc.wantErr, tc.errText)
				}
				if _, ok := a.Plugin("b"); ok {
					t.Errorf("refused plugin was registered")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for n, id := range tc.wantIDs {
				if got, _ := a.Table(n); got.ID != id {
					t.Errorf("table %s got ID %d, want %d", n, got.ID, id)
				}
			}
		})
	}

	// A constraint on a table not loaded yet keeps its place: x1 must come
	// after "later", which loads afterwards and still fits before it.
	a := New()
	if _, err := a.Register("a", []sdk.Table{eg("x1", []string{"later"}, nil)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register("b", []sdk.Table{eg("later", nil, nil)}, nil); err != nil {
		t.Fatalf("later table: %v", err)
	}
	later, _ := a.Table("later")
	x1, _ := a.Table("x1")
	if later.ID >= x1.ID {
		t.Errorf("later got ID %d, x1 %d: want later before x1", later.ID, x1.ID)
	}
	// The same the other way round: y must come before "after-y", which
	// loads later and finds an ID above y.
	a = New()
	if _, err := a.Register("a", []sdk.Table{eg("y", nil, []string{"after-y"})}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register("b", []sdk.Table{eg("after-y", nil, nil)}, nil); err != nil {
		t.Fatalf("after-y: %v", err)
	}
	y, _ := a.Table("y")
	ay, _ := a.Table("after-y")
	if ay.ID <= y.ID {
		t.Errorf("after-y got ID %d, y %d: want after-y after y", ay.ID, y.ID)
	}
}

// Ct zones, ct_mark bits and metadata bits are granted by name, published
// like tables, survive a snapshot, and a flow using one not granted to its
// plugin is refused with the plugin, the resource and the fix.
func TestResources(t *testing.T) {
	a := New()
	ct := func(name string) []sdk.Table {
		return []sdk.Table{{Name: name, Pipeline: flow.PipelineIP, Stage: flow.StageConntrackState, Exported: true}}
	}
	if _, err := a.Register("a", ct("a.ct"), nil,
		sdk.Resource{Kind: sdk.ResourceCTZone, Name: "a.zone"},
		sdk.Resource{Kind: sdk.ResourceCTMark, Name: "a.mark", Width: 4, Exported: true},
		sdk.Resource{Kind: sdk.ResourceMetadata, Name: "a.meta", Width: 8}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register("b", ct("b.ct"), nil, sdk.Resource{Kind: sdk.ResourceCTZone, Name: "b.zone"}); err != nil {
		t.Fatal(err)
	}
	asgA, _ := a.Assignment("a")
	asgB, _ := a.Assignment("b")
	wantB := map[string]sdk.Grant{
		"b.zone": {Kind: sdk.ResourceCTZone, Owner: "b", Value: 2},
		"a.mark": {Kind: sdk.ResourceCTMark, Owner: "a", Offset: 0, Width: 4},
	}
	if diff := cmp.Diff(wantB, asgB.Grants); diff != "" {
		t.Errorf("b's grants (-want +got):\n%s", diff)
	}
	if g := asgA.Grants["a.meta"]; g.Kind != sdk.ResourceMetadata || g.Width != 8 || g.Offset != 0 {
		t.Errorf("a.meta granted %+v", g)
	}
	cases := []struct {
		name    string
		owner   string
		flow    flow.Flow
		errText string // "" when allowed
	}{
		{"own zone", "b", flow.Flow{Table: "b.ct", Priority: 1, Actions: []flow.Action{flow.Conntrack(flow.CT{Zone: 2})}}, ""},
		{"default zone is shared", "b", flow.Flow{Table: "b.ct", Priority: 1, Actions: []flow.Action{flow.Conntrack(flow.CT{Commit: true})}}, ""},
		{"published ct_mark bits", "b", flow.Flow{Table: "b.ct", Priority: 1, Match: flow.Match{}.CTMark(1, 0xf)}, ""},
		{"own metadata bits", "a", flow.Flow{Table: "a.ct", Priority: 1, Match: flow.Match{}.Metadata(1, 0xff)}, ""},
		{"another plugin's zone", "b", flow.Flow{Table: "b.ct", Priority: 1, Actions: []flow.Action{flow.Conntrack(flow.CT{Zone: 1})}},
			`plugin "b": flow in table "b.ct" uses ct zone 1, which was not granted to it; request a ct_zone resource in Describe (sdk.Resource) and use Assignment.Grants[name].Value`},
		{"zone match", "b", flow.Flow{Table: "b.ct", Priority: 1, Match: flow.Match{}.CTZone(7)}, `uses ct zone 7, which was not granted`},
		{"private metadata bits", "b", flow.Flow{Table: "b.ct", Priority: 1, Match: flow.Match{}.Metadata(1, 0xff)}, `uses metadata bits 0xff, which was not granted`},
		{"ct_mark bits beyond the grant", "b", flow.Flow{Table: "b.ct", Priority: 1, Actions: []flow.Action{flow.Conntrack(flow.CT{Commit: true, Mark: 0x10, MarkMask: 0x10})}},
			`uses ct_mark bits 0x10, which was not granted`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.flow
			_, err := a.Resolve(tc.owner, &f)
			if tc.errText == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, sdk.ErrUnallocatedField) || !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("err = %v, want ErrUnallocatedField containing %q", err, tc.errText)
			}
		})
	}
	_, err := a.Register("c", nil, nil, sdk.Resource{Kind: sdk.ResourceCTZone, Name: "a.zone"})
	if want := `resource "a.zone" is already granted to plugin "a"`; !errors.Is(err, sdk.ErrConflict) || !strings.Contains(err.Error(), want) {
		t.Errorf("name clash: err = %v, want ErrConflict containing %q", err, want)
	}
	for _, bad := range []struct {
		res  []sdk.Resource
		want string
	}{
		{[]sdk.Resource{{Kind: sdk.ResourceCTMark, Name: "d.mark"}}, `resource "d.mark": ct_mark width 0 must be 1-32`},
		{[]sdk.Resource{{Kind: sdk.ResourceMetadata, Name: "d.meta", Width: 65}}, `resource "d.meta": metadata width 65 must be 1-64`},
		{[]sdk.Resource{{Kind: sdk.ResourceCTZone}}, `a ct_zone resource has no name`},
		{[]sdk.Resource{{Kind: sdk.ResourceCTZone, Name: "d.z"}, {Kind: sdk.ResourceCTZone, Name: "d.z"}}, `resource "d.z" requested twice`},
	} {
		if _, err := a.Register("d", nil, nil, bad.res...); !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("bad request %+v: err = %v, want ErrInvalid containing %q", bad.res, err, bad.want)
		}
	}
	r, err := Restore(a.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a.Grants(), r.Grants()); diff != "" {
		t.Errorf("grants after restore (-want +got):\n%s", diff)
	}
}

// pkt_mark and ct_label bits are granted like ct_mark bits, and an output
// may go only to the plugin's own ports, exported ports, the host's ports,
// reserved ports or numbers no port holds.
func TestMarksLabelsAndPorts(t *testing.T) {
	a := New()
	tbl := func(name string) []sdk.Table {
		return []sdk.Table{{Name: name, Pipeline: flow.PipelineIP, Stage: flow.StageRouting}}
	}
	if _, err := a.Register("a", tbl("a.t"), nil,
		sdk.Resource{Kind: sdk.ResourcePktMark, Name: "a.egress_mark", Width: 4, Exported: true},
		sdk.Resource{Kind: sdk.ResourceCTLabel, Name: "a.rule", Width: 32},
		sdk.Resource{Kind: sdk.ResourceCTLabel, Name: "a.rule_hi", Width: 64}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Register("b", tbl("b.t"), nil, sdk.Resource{Kind: sdk.ResourceCTLabel, Name: "b.label", Width: 16}); err != nil {
		t.Fatal(err)
	}
	asgB, _ := a.Assignment("b")
	// a holds label bits 0-31 and 32-95; b gets the next free run.
	if g := asgB.Grants["b.label"]; g.Offset != 96 || g.Width != 16 {
		t.Errorf("b.label granted %+v, want offset 96 width 16", g)
	}
	if m := asgB.Grants["b.label"].Mask128(); m != (flow.Uint128{Hi: 0xffff << 32}) {
		t.Errorf("b.label mask %+v", m)
	}
	a.SetPort(5, PortGrant{Name: "pod-a", Owner: "a"})
	a.SetPort(6, PortGrant{Name: "tun0", Owner: "a", Exported: true})
	a.SetPort(7, PortGrant{Name: "gw0"}) // the host's own
	out := func(p uint32) []flow.Action { return []flow.Action{flow.Output(p)} }
	cases := []struct {
		name    string
		owner   string
		flow    flow.Flow
		errIs   error
		errText string // "" when allowed
	}{
		{"published pkt_mark bits", "b", flow.Flow{Table: "b.t", Priority: 1, Match: flow.Match{}.PktMark(1, 0xf)}, nil, ""},
		{"pkt_mark bits beyond the grant", "b", flow.Flow{Table: "b.t", Priority: 1, Actions: []flow.Action{flow.SetPktMark(0x10, 0x10)}}, sdk.ErrUnallocatedField,
			`plugin "b": flow in table "b.t" uses pkt_mark bits 0x10, which was not granted to it; request a pkt_mark resource`},
		{"whole pkt_mark write", "a", flow.Flow{Table: "a.t", Priority: 1, Actions: []flow.Action{flow.SetPktMark(1, 0xffffffff)}}, sdk.ErrUnallocatedField, `uses pkt_mark bits 0xfffffff0`},
		{"move into granted pkt_mark bits", "a", flow.Flow{Table: "a.t", Priority: 1, Actions: []flow.Action{flow.Move(flow.Header(flow.MatchIPv4Src), flow.HeaderBits(flow.MatchPktMark, 0, 4))}}, nil, ""},
		{"move into metadata", "a", flow.Flow{Table: "a.t", Priority: 1, Actions: []flow.Action{flow.Move(flow.Header(flow.MatchIPv4Src), flow.HeaderBits(flow.MatchMetadata, 8, 8))}}, sdk.ErrUnallocatedField, `uses metadata bits 0xff00`},
		{"own high label bits", "a", flow.Flow{Table: "a.t", Priority: 1, Match: flow.Match{}.CTLabel(flow.Uint128{Hi: 1}, flow.Uint128{Hi: 0xffffffff})}, nil, ""},
		{"another plugin's label bits", "b", flow.Flow{Table: "b.t", Priority: 1, Match: flow.Match{}.CTLabel(flow.Uint128{Lo: 1}, flow.Uint128{Lo: 0xff})}, sdk.ErrUnallocatedField, `uses ct_label bits 0xff, which was not granted`},
		{"label commit beyond the grant", "b", flow.Flow{Table: "b.t", Priority: 1, Actions: []flow.Action{flow.Conntrack(flow.CT{Commit: true, Label: flow.Uint128{Hi: 1}, LabelMask: flow.Uint128{Hi: 0x1_0000_ffff}})}}, sdk.ErrUnallocatedField,
			`uses ct_label bits 0xffff0000000000000000`},
		{"own port", "a", flow.Flow{Table: "a.t", Priority: 1, Actions: out(5)}, nil, ""},
		{"exported port", "b", flow.Flow{Table: "b.t", Priority: 1, Actions: out(6)}, nil, ""},
		{"host port", "b", flow.Flow{Table: "b.t", Priority: 1, Actions: out(7)}, nil, ""},
		{"reserved port", "b", flow.Flow{Table: "b.t", Priority: 1, Actions: []flow.Action{flow.OutputInPort(), flow.Output(0xfffffffd)}}, nil, ""},
		{"no such port", "b", flow.Flow{Table: "b.t", Priority: 1, Actions: out(99)}, nil, ""},
		{"another plugin's port", "b", flow.Flow{Table: "b.t", Priority: 1, Actions: out(5)}, sdk.ErrNotOwner,
			`plugin "b": flow in table "b.t" outputs to port 5 ("pod-a"), which belongs to plugin "a" and is not exported; output only to your own ports, or have "a" create the port with PortRequest.Exported`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.flow
			_, err := a.Resolve(tc.owner, &f)
			if tc.errText == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.errIs) || !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("err = %v, want %v containing %q", err, tc.errIs, tc.errText)
			}
		})
	}
	// The same rules hold outside flows: group buckets and packet-outs.
	if err := a.CheckActions("b", "packet-out", out(5)); !errors.Is(err, sdk.ErrNotOwner) || !strings.Contains(err.Error(), `packet-out outputs to port 5`) {
		t.Errorf("packet-out to another plugin's port: %v", err)
	}
	// A deleted port is forgotten; a renumbered one follows its name.
	a.ForgetPort("pod-a")
	if err := a.CheckActions("b", "packet-out", out(5)); err != nil {
		t.Errorf("after the port went: %v", err)
	}
	a.SetPort(8, PortGrant{Name: "tun0", Owner: "a"})
	if err := a.CheckActions("b", "packet-out", out(6)); err != nil {
		t.Errorf("old number of a renumbered port: %v", err)
	}
	if err := a.CheckActions("b", "group 1 bucket 0", out(8)); !errors.Is(err, sdk.ErrNotOwner) {
		t.Errorf("bucket output to a no longer exported port: %v", err)
	}
	for _, bad := range []struct {
		res  sdk.Resource
		want string
	}{
		{sdk.Resource{Kind: sdk.ResourceCTLabel, Name: "d.l", Width: 65}, `resource "d.l": ct_label width 65 must be 1-64`},
		{sdk.Resource{Kind: sdk.ResourcePktMark, Name: "d.m", Width: 33}, `resource "d.m": pkt_mark width 33 must be 1-32`},
		{sdk.Resource{Kind: 99, Name: "d.x", Width: 1}, `resource "d.x": unknown kind 99`},
	} {
		if _, err := a.Register("d", nil, nil, bad.res); !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("bad request %+v: err = %v, want ErrInvalid containing %q", bad.res, err, bad.want)
		}
	}
}
