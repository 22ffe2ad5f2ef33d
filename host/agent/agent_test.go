package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// fakeSwitch records bundles; fail makes the next bundle fail (the seam
// stands in for ovs-vswitchd, which the itests use for real).
type fakeSwitch struct {
	mu      sync.Mutex
	bundles [][]openflow.Message
	fail    error
	events  chan openflow.Event
	// hold, if set, is called before a bundle is taken, outside the lock,
	// so a test can keep one bundle "on the wire".
	hold func(msgs []openflow.Message)
	// What the read-back and the foreign sweep read.
	dump       []openflow.FlowStats
	dumpReq    []openflow.FlowStatsRequest
	cookies    []openflow.FlowCookie
	groups     []openflow.GroupStats
	groupDescs []openflow.GroupDesc
	meters     []openflow.MeterStats
	// requests are the messages sent with Request.
	requests []openflow.Message
}

func (f *fakeSwitch) GroupDesc(context.Context, uint32) ([]openflow.GroupDesc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.groupDescs, nil
}

func (f *fakeSwitch) Bundle(_ context.Context, msgs []openflow.Message, _ bool) error {
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		hold(msgs)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		err := f.fail
		f.fail = nil
		return err
	}
	f.bundles = append(f.bundles, msgs)
	return nil
}
func (f *fakeSwitch) Send(context.Context, openflow.Message) error { return nil }
func (f *fakeSwitch) Request(_ context.Context, m openflow.Message) (openflow.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, m)
	return nil, nil
}
func (f *fakeSwitch) Events() <-chan openflow.Event { return f.events }

// DumpFlows answers with f.dump and records the request.
func (f *fakeSwitch) DumpFlows(_ context.Context, req openflow.FlowStatsRequest) ([]openflow.FlowStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dumpReq = append(f.dumpReq, req)
	return f.dump, nil
}

// DumpCookies answers with f.cookies (the foreign sweep's view).
func (f *fakeSwitch) DumpCookies(context.Context, openflow.FlowStatsRequest) ([]openflow.FlowCookie, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cookies, nil
}
func (f *fakeSwitch) GroupStats(context.Context, uint32) ([]openflow.GroupStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.groups, nil
}
func (f *fakeSwitch) MeterStats(context.Context, uint32) ([]openflow.MeterStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.meters, nil
}

// lastTexts renders the last bundle's flow mods.
func (f *fakeSwitch) lastTexts() []string {
	f.mu.Lock()
	n := len(f.bundles)
	f.mu.Unlock()
	return f.textsSince(n - 1)
}

// textsSince renders the flow mods of bundles[i:].
func (f *fakeSwitch) textsSince(i int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, b := range f.bundles[i:] {
		for _, m := range b {
			if fm, ok := m.(*openflow.FlowMod); ok {
				out = append(out, fm.Command.String()+" "+fm.Flow.String())
			}
		}
	}
	return out
}

func (f *fakeSwitch) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bundles)
}

type fakeDB struct {
	mu      sync.Mutex
	ports   map[string]ovsdb.PortInfo
	deleted []string
}

func (d *fakeDB) CreatePort(_ context.Context, s ovsdb.PortSpec) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ports[s.Name] = ovsdb.PortInfo{Name: s.Name, Owner: s.Owner, OFPort: len(d.ports) + 1}
	return nil
}

// EnsurePort picks as CreatePort does, one above the ports there, and
// records the number as requested, as OVSDB would.
func (d *fakeDB) EnsurePort(_ context.Context, s ovsdb.PortSpec) (uint32, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.ports[s.Name]; ok {
		return 0, nil
	}
	no := int(s.OFPort)
	if no == 0 {
		for _, p := range d.ports {
			no = max(no, p.OFPort)
		}
		no++
	}
	d.ports[s.Name] = ovsdb.PortInfo{Name: s.Name, Owner: s.Owner, OFPort: no, OFPortRequest: no}
	return uint32(no), nil
}
func (d *fakeDB) DeletePort(_ context.Context, n string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.ports, n)
	d.deleted = append(d.deleted, n)
	return nil
}
func (d *fakeDB) LabelPort(_ context.Context, n string, set map[string]string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.ports[n]
	if !ok {
		return ovsdb.ErrNoPort
	}
	p.ExternalIDs = sdk.Relabel(p.ExternalIDs, set)
	d.ports[n] = p
	return nil
}
func (d *fakeDB) Port(_ context.Context, n string) (ovsdb.PortInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.ports[n]
	if !ok {
		return p, ovsdb.ErrNoPort
	}
	return p, nil
}
func (d *fakeDB) Ports(_ context.Context, owner string) ([]ovsdb.PortInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []ovsdb.PortInfo
	for _, p := range d.ports {
		if p.Owner == owner {
			out = append(out, p)
		}
	}
	return out, nil
}
func (d *fakeDB) WaitOFPort(_ context.Context, n string) (uint32, error) {
	p, err := d.Port(context.Background(), n)
	return uint32(p.OFPort), err
}
func (d *fakeDB) FlowRestoreWait(context.Context) (bool, error)  { return false, nil }
func (d *fakeDB) SetFlowRestoreWait(context.Context, bool) error { return nil }

func newTestAgent(t *testing.T) (*Agent, *fakeSwitch, *fakeDB) {
	t.Helper()
	return newTestAgentIn(t, t.TempDir())
}

// restartedAgent is a new agent process on an existing run dir: it loads
// the layout an earlier one persisted there.
func restartedAgent(t *testing.T, dir string) (*Agent, *fakeSwitch) {
	t.Helper()
	a, sw, _ := newTestAgentIn(t, dir)
	if err := a.loadLayout(); err != nil {
		t.Fatal(err)
	}
	return a, sw
}

func newTestAgentIn(t *testing.T, dir string) (*Agent, *fakeSwitch, *fakeDB) {
	t.Helper()
	return newTestAgentWith(t, dir, nil)
}

// newTestAgentWith builds an agent on dir whose config enables plugins.
func newTestAgentWith(t *testing.T, dir string, plugins []config.Plugin) (*Agent, *fakeSwitch, *fakeDB) {
	t.Helper()
	cfg := &config.Config{NodeName: "n", Bridge: config.Bridge{Name: "br-int", DatapathType: "netdev"}, RunDir: dir, Node: config.Node{MTU: 1500},
		Plugins: plugins}
	sw := &fakeSwitch{events: make(chan openflow.Event)}
	db := &fakeDB{ports: map[string]ovsdb.PortInfo{}}
	a, err := New(cfg, sw, db, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return a, sw, db
}

func register(t *testing.T, a *Agent, owner string, tables ...sdk.Table) {
	t.Helper()
	if _, err := a.RegisterLocal(context.Background(), owner, &sdk.DescribeResponse{Name: owner, Tables: tables}); err != nil {
		t.Fatal(err)
	}
}

var (
	tVal   = sdk.Table{Name: "a.val", Pipeline: flow.PipelineIP, Stage: flow.StageValidation, Miss: sdk.MissNext, Exported: true}
	tOut   = sdk.Table{Name: "b.out", Pipeline: flow.PipelineIP, Stage: flow.StageOutput}
	tRoute = sdk.Table{Name: "c.route", Pipeline: flow.PipelineIP, Stage: flow.StageRouting}
)

func TestApplyArbitration(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	register(t, a, "a", tVal)
	register(t, a, "b", tOut)
	lim := config.Limits{MaxBatch: 3, MaxFlows: 4}
	f := flow.Flow{Table: "a.val", Priority: 10, Match: flow.Match{}.InPort(1), Goto: flow.NextTable()}

	if err := a.Apply(ctx, "a", flow.NewBatch().AddFlows(f), lim); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ADD cookie=0x1000100000000, table=30, priority=10,in_port=1 actions=goto_table:200"}, sw.lastTexts()); diff != "" {
		t.Errorf("bundle (-want +got):\n%s", diff)
	}
	cases := []struct {
		name  string
		owner string
		b     *flow.Batch
		want  error
		text  string
	}{
		{"same key from another plugin", "b", flow.NewBatch().AddFlows(f), sdk.ErrConflict, `plugin "a" already holds`},
		{"batch too big", "a", flow.NewBatch().AddFlows(f, f, f, f), sdk.ErrLimit, "batch of 4 operations is over its limit of 3"},
		{"too many flows", "b", flow.NewBatch().AddFlows(
			flow.Flow{Table: "b.out", Priority: 1, Match: flow.Match{}.InPort(1)}, flow.Flow{Table: "b.out", Priority: 1, Match: flow.Match{}.InPort(2)},
			flow.Flow{Table: "b.out", Priority: 1, Match: flow.Match{}.InPort(3)}), nil, ""},
		{"fifth flow is over the limit", "b", flow.NewBatch().AddFlows(
			flow.Flow{Table: "b.out", Priority: 1, Match: flow.Match{}.InPort(4)}, flow.Flow{Table: "b.out", Priority: 1, Match: flow.Match{}.InPort(5)}), sdk.ErrLimit, "would hold 5 flows, over its limit of 4"},
		{"invalid batch", "a", flow.NewBatch().AddFlows(flow.Flow{}), sdk.ErrInvalid, "flow has no table"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := a.Apply(ctx, tc.owner, tc.b, lim)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err = %v, want %v containing %q", err, tc.want, tc.text)
			}
		})
	}
}

func TestSwitchRefusalLeavesStoreUnchanged(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	register(t, a, "a", tVal)
	sw.fail = errors.New("OFPBFC_MSG_FAILED")
	err := a.Apply(ctx, "a", flow.NewBatch().AddFlows(flow.Flow{Table: "a.val", Priority: 1}), config.Limits{})
	if !errors.Is(err, sdk.ErrSwitch) {
		t.Fatalf("err = %v, want ErrSwitch", err)
	}
	if n := len(a.Flows("a")); n != 0 { // a.val is the only table: no miss flow
		t.Errorf("store holds %d flows of a after a refused batch, want 0", n)
	}
}

func TestSyncSweepsStaleRounds(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	register(t, a, "a", tVal)
	keep := flow.Flow{Table: "a.val", Priority: 5, Match: flow.Match{}.InPort(1)}
	stale := flow.Flow{Table: "a.val", Priority: 5, Match: flow.Match{}.InPort(2)}
	if err := a.Apply(ctx, "a", flow.NewBatch().AddFlows(keep, stale), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	register(t, a, "a", tVal) // restart: round 2
	bundles := sw.count()
	if err := a.Apply(ctx, "a", flow.NewBatch().AddFlows(keep), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	// keep is on the switch exactly as re-submitted: nothing is sent.
	if n := sw.count(); n != bundles {
		t.Errorf("re-submitting an unchanged flow sent %d bundles, want none: %v", n-bundles, sw.textsSince(bundles))
	}
	n, err := a.Synced(ctx, "a")
	if err != nil || n != 1 {
		t.Fatalf("Synced = %d, %v; want 1 stale flow", n, err)
	}
	// Round 1 was registered by this agent, so its flows are known one by
	// one: the flow round 2 did not submit goes by key, keep stays.
	want := []string{"DEL_STRICT cookie=0x1000100000000, table=30, priority=5,in_port=2 actions=drop"}
	if diff := cmp.Diff(want, sw.lastTexts()); diff != "" {
		t.Errorf("sweep bundle (-want +got):\n%s", diff)
	}
	got := a.Flows("a")
	if len(got) != 1 || !strings.Contains(got[0], "in_port=1") {
		t.Errorf("store after the sweep holds %v, want only the in_port=1 flow", got)
	}
	if n, _ := a.Synced(ctx, "a"); n != 0 {
		t.Errorf("second Synced swept %d flows, want 0", n)
	}
}

// TestSyncSweepsRoundsOfAnEarlierAgentByCookie: flows of a round the
// current agent process never saw (installed before it restarted) are
// swept by their cookie.
func TestSyncSweepsRoundsOfAnEarlierAgentByCookie(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	start := func() (*Agent, *fakeSwitch) { return restartedAgent(t, dir) }
	a1, _ := start()
	register(t, a1, "a", tVal)
	if err := a1.Apply(ctx, "a", flow.NewBatch().AddFlows(flow.Flow{Table: "a.val", Priority: 5, Match: flow.Match{}.InPort(1)}), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	a2, sw := start() // the agent restarts; round 1's flow stays on the switch
	register(t, a2, "a", tVal)
	if _, err := a2.Synced(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	want := []string{"DEL cookie=0x1000100000000, table=255, priority=0 actions=drop"}
	if diff := cmp.Diff(want, sw.lastTexts()); diff != "" {
		t.Errorf("sweep bundle (-want +got):\n%s", diff)
	}
	sw.mu.Lock()
	fm := sw.bundles[len(sw.bundles)-1][0].(*openflow.FlowMod)
	sw.mu.Unlock()
	if fm.CookieMask != pipeline.CookieOwnerMask {
		t.Errorf("sweep cookie mask %#x, want prefix+round", fm.CookieMask)
	}
}

func TestSyncSweepsStaleGroups(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	register(t, a, "a", tVal)
	g := func(id uint32) flow.Group {
		return flow.Group{ID: id, Type: flow.GroupAll, Buckets: []flow.Bucket{{Actions: []flow.Action{flow.Output(1)}}}}
	}
	if err := a.Apply(ctx, "a", flow.NewBatch().AddGroup(g(1)).AddGroup(g(2)), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	register(t, a, "a", tVal) // restart: only group 2 is written again
	if err := a.Apply(ctx, "a", flow.NewBatch().AddGroup(g(2)), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Synced(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	sw.mu.Lock()
	last := sw.bundles[len(sw.bundles)-1]
	sw.mu.Unlock()
	var deleted []uint32
	for _, m := range last {
		if gm, ok := m.(*openflow.GroupMod); ok && gm.Command == openflow.GroupDelete {
			deleted = append(deleted, gm.GroupID)
		}
	}
	if diff := cmp.Diff([]uint32{pipeline.GroupID(1, 1)}, deleted); diff != "" {
		t.Errorf("swept groups (-want +got):\n%s", diff)
	}
	if gs := a.store.Groups("a"); len(gs) != 1 || gs[0].Group.ID != 2 {
		t.Errorf("store groups after sweep: %v", gs)
	}
}

func TestHotLoadRepointsNextTable(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	register(t, a, "a", tVal)
	register(t, a, "b", tOut)
	if err := a.Apply(ctx, "a", flow.NewBatch().AddFlows(flow.Flow{Table: "a.val", Priority: 10, Goto: flow.NextTable()}), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	before := sw.count()
	register(t, a, "c", tRoute) // lands between 30 and 200
	got := sw.textsSince(before)
	want := []string{
		"ADD cookie=0x1000100000000, table=30, priority=10 actions=goto_table:90", // a's flow
		"ADD cookie=0x1000100000000, table=30, priority=0 actions=goto_table:90",  // a.val's miss flow
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("re-pointed flows (-want +got):\n%s", diff)
	}
	tables := a.Tables()
	if tables[1].Table != "c.route" || tables[1].ID != 90 {
		t.Errorf("layout %+v", tables)
	}
}

func TestRemoveOwner(t *testing.T) {
	ctx := context.Background()
	a, sw, db := newTestAgent(t)
	register(t, a, "a", tVal)
	register(t, a, "b", tOut)
	_ = db.CreatePort(ctx, ovsdb.PortSpec{Name: "p1", Owner: "b"})
	_ = db.CreatePort(ctx, ovsdb.PortSpec{Name: "p2", Owner: "a"})
	// a writes into nothing of b's; b holds a flow in a's exported table.
	if err := a.Apply(ctx, "b", flow.NewBatch().AddFlows(flow.Flow{Table: "a.val", Priority: 3}), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	before := sw.count()
	a.RemoveOwner(ctx, "b")
	want := []string{
		"DEL cookie=0x2000000000000, table=255, priority=0 actions=drop",       // everything with b's prefix
		"DEL table=200, priority=0 actions=drop",                               // and everything left in b's table
		"DEL_STRICT cookie=0x1000100000000, table=30, priority=0 actions=drop", // a.val is now last: no miss flow
	}
	if diff := cmp.Diff(want, sw.textsSince(before)); diff != "" {
		t.Errorf("unload bundles (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"p1"}, db.deleted); diff != "" {
		t.Errorf("deleted ports (-want +got):\n%s", diff)
	}
	if _, ok := a.arb.Plugin("b"); ok || len(a.Flows("b")) != 0 {
		t.Errorf("b still registered or holding flows")
	}
	// a's miss flow pointed at b.out (the next table); with b gone a.val is
	// the last table of the pipeline, so its miss flow is removed (a miss drops).
	if diff := cmp.Diff([]string(nil), a.Flows("a")); diff != "" {
		t.Errorf("a's flows after b left (-want +got):\n%s", diff)
	}
}

// cookiePrefix is the cookie prefix of a bundle's first flow mod.
func cookiePrefix(msgs []openflow.Message) uint16 {
	for _, m := range msgs {
		if fm, ok := m.(*openflow.FlowMod); ok {
			p, _, _ := pipeline.SplitCookie(fm.Flow.Cookie)
			return p
		}
	}
	return 0
}

// A plugin's batch that is still on its way to the switch neither blocks
// another plugin's batch nor lets it take the same flow key.
func TestBatchesOfPluginsDoNotWaitForEachOther(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	register(t, a, "a", tVal)
	register(t, a, "b", tOut)
	pa, _ := a.arb.Plugin("a")
	onWire, release := make(chan struct{}), make(chan struct{})
	sw.mu.Lock()
	sw.hold = func(msgs []openflow.Message) {
		if cookiePrefix(msgs) == pa.Prefix {
			close(onWire)
			<-release
		}
	}
	sw.mu.Unlock()
	shared := flow.Flow{Table: "a.val", Priority: 7, Match: flow.Match{}.InPort(9)}
	big := flow.NewBatch().AddFlows(shared)
	for i := range 100 {
		big.AddFlows(flow.Flow{Table: "a.val", Priority: 5, Match: flow.Match{}.InPort(uint32(100 + i))})
	}
	aDone := make(chan error, 1)
	go func() { aDone <- a.Apply(ctx, "a", big, config.Limits{}) }()
	<-onWire

	// b's own flow goes through while a's batch is held on the wire.
	if err := a.Apply(ctx, "b", flow.NewBatch().AddFlows(flow.Flow{Table: "b.out", Priority: 1, Match: flow.Match{}.InPort(1)}), config.Limits{}); err != nil {
		t.Fatalf("b's batch while a's is on the wire: %v", err)
	}
	// The key a is installing is taken, although not yet committed.
	err := a.Apply(ctx, "b", flow.NewBatch().AddFlows(shared), config.Limits{})
	if !errors.Is(err, sdk.ErrConflict) || !strings.Contains(err.Error(), `plugin "a" is installing that table, priority and match right now`) {
		t.Errorf("b writing a's in-flight key: err = %v, want ErrConflict naming plugin a", err)
	}
	close(release)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	// Once committed, the usual conflict applies.
	err = a.Apply(ctx, "b", flow.NewBatch().AddFlows(shared), config.Limits{})
	if !errors.Is(err, sdk.ErrConflict) || !strings.Contains(err.Error(), `plugin "a" already holds`) {
		t.Errorf("b writing a's installed key: err = %v, want ErrConflict", err)
	}
	if n := len(a.Flows("a")); n != 102 { // the batch and a.val's miss flow
		t.Errorf("a holds %d flows, want 102", n)
	}
}

// Unloading a plugin removes, in the same bundle, the flows of others that
// jump into its tables by name: nothing on the switch points at a table
// nobody owns.
func TestUnloadRemovesDanglingJumps(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	register(t, a, "a", tVal)
	register(t, a, "c", sdk.Table{Name: "c.route", Pipeline: flow.PipelineIP, Stage: flow.StageRouting, Exported: true})
	jump := flow.Flow{Table: "a.val", Priority: 10, Match: flow.Match{}.InPort(4), Goto: flow.GotoTable("c.route")}
	if err := a.Apply(ctx, "a", flow.NewBatch().AddFlows(jump), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	before := sw.count()
	a.RemoveOwner(ctx, "c")
	if n := sw.count() - before; n != 1 {
		t.Errorf("unload took %d bundles, want 1 (one layout change, one bundle)", n)
	}
	got := sw.textsSince(before)
	want := []string{
		"DEL cookie=0x2000000000000, table=255, priority=0 actions=drop",
		"DEL table=90, priority=0 actions=drop",
		"DEL_STRICT cookie=0x1000100000000, table=30, priority=10,in_port=4 actions=drop", // a's jump into c.route
		"DEL_STRICT cookie=0x1000100000000, table=30, priority=0 actions=drop",            // a.val is last again
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unload bundle (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string(nil), a.Flows("a")); diff != "" {
		t.Errorf("a's flows after c left (-want +got):\n%s", diff)
	}
}

// The foreign sweep removes what no registered owner holds now, by cookie,
// and counts what it removed.
func TestSweepForeign(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	register(t, a, "a", tVal)
	register(t, a, "a", tVal) // round 2; round 1 was swept by nobody yet
	if _, err := a.Synced(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(ctx, "a", flow.NewBatch().AddGroup(flow.Group{ID: 1, Type: flow.GroupAll, Buckets: []flow.Bucket{{Actions: []flow.Action{flow.Output(1)}}}}), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	cookie := func(c uint64) openflow.FlowCookie { return openflow.FlowCookie{Cookie: c} }
	sw.mu.Lock()
	sw.cookies = []openflow.FlowCookie{
		cookie(pipeline.Cookie(1, 2, 0)), cookie(pipeline.Cookie(1, 2, 5)), // a's current round: kept
		cookie(pipeline.Cookie(1, 1, 0)), cookie(pipeline.Cookie(1, 7, 0)), // a's older rounds
		cookie(0xdead_0000_0000_0000), cookie(0xdead_0001_0000_0001), // a prefix nobody has
		cookie(0), // cookie 0
	}
	sw.groupDescs = []openflow.GroupDesc{{GroupID: pipeline.GroupID(1, 1)}, {GroupID: pipeline.GroupID(1, 9)}, {GroupID: 77}}
	sw.mu.Unlock()
	before := sw.count()
	res, err := a.SweepForeign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(SweepResult{Flows: 5, Groups: 2}, res); diff != "" {
		t.Errorf("sweep counts (-want +got):\n%s", diff)
	}
	want := []string{
		"DEL cookie=0x1000100000000, table=255, priority=0 actions=drop",
		"DEL cookie=0x1000700000000, table=255, priority=0 actions=drop",
		"DEL cookie=0xdead000000000000, table=255, priority=0 actions=drop",
		"DEL table=255, priority=0 actions=drop",
	}
	if diff := cmp.Diff(want, sw.textsSince(before)); diff != "" {
		t.Errorf("sweep bundle (-want +got):\n%s", diff)
	}
	sw.mu.Lock()
	var masks []uint64
	var groups []uint32
	for _, m := range sw.bundles[len(sw.bundles)-1] {
		switch m := m.(type) {
		case *openflow.FlowMod:
			masks = append(masks, m.CookieMask)
		case *openflow.GroupMod:
			groups = append(groups, m.GroupID)
		}
	}
	sw.mu.Unlock()
	if diff := cmp.Diff([]uint64{pipeline.CookieOwnerMask, pipeline.CookieOwnerMask, pipeline.CookiePrefixMask, ^uint64(0)}, masks); diff != "" {
		t.Errorf("cookie masks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]uint32{pipeline.GroupID(1, 9), 77}, groups); diff != "" {
		t.Errorf("swept groups (-want +got):\n%s", diff)
	}
}

// /v1/resources lists every granted resource with its owner, ports too.
func TestResourcesListed(t *testing.T) {
	a, _, _ := newTestAgent(t)
	if _, err := a.RegisterLocal(context.Background(), "a", &sdk.DescribeResponse{Name: "a", Tables: []sdk.Table{tVal},
		Resources: []sdk.Resource{{Kind: sdk.ResourceCTZone, Name: "a.zone"}, {Kind: sdk.ResourceCTMark, Name: "a.mark", Width: 2, Exported: true}}}); err != nil {
		t.Fatal(err)
	}
	a.recordPort(3, pipeline.PortGrant{Name: "tun0", Owner: "a", Exported: true})
	a.recordPort(2, pipeline.PortGrant{Name: "pod1", Owner: "a"})
	want := []ResourceStatus{
		{Name: "a.mark", Kind: "ct_mark", Owner: "a", Offset: 0, Width: 2, Published: true},
		{Name: "a.zone", Kind: "ct_zone", Owner: "a", Value: 1},
		{Name: "pod1", Kind: "ofport", Owner: "a", Value: 2},
		{Name: "tun0", Kind: "ofport", Owner: "a", Value: 3, Published: true},
	}
	if diff := cmp.Diff(want, a.Resources()); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
}

// TestSweepSparesHeldAndLearned: the foreign sweep keeps a flow the store
// holds under an older round (a restarted plugin re-submitted it unchanged,
// so the switch kept its old cookie) and the flows the switch learned for
// a loaded plugin; a round nobody holds goes.
func TestSweepSparesHeldAndLearned(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	f := flow.Flow{Table: "a.val", Priority: 5, Match: flow.Match{}.InPort(1)}
	register(t, a, "a", tVal)
	if err := a.Apply(ctx, "a", flow.NewBatch().AddFlows(f), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	register(t, a, "a", tVal) // round 2 re-submits f unchanged: a refresh
	if err := a.Apply(ctx, "a", flow.NewBatch().AddFlows(f), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Synced(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	cookie := func(c uint64) openflow.FlowCookie { return openflow.FlowCookie{Cookie: c} }
	sw.mu.Lock()
	sw.cookies = []openflow.FlowCookie{
		cookie(pipeline.Cookie(1, 1, 0)),                     // f, still under round 1: held
		cookie(pipeline.Cookie(1, pipeline.LearnedRound, 7)), // learned by the switch
		cookie(pipeline.Cookie(1, 3, 0)),                     // nobody's
	}
	sw.mu.Unlock()
	before := sw.count()
	res, err := a.SweepForeign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Flows != 1 {
		t.Errorf("swept %d flows, want 1 (only round 3)", res.Flows)
	}
	if diff := cmp.Diff([]string{"DEL cookie=0x1000300000000, table=255, priority=0 actions=drop"}, sw.textsSince(before)); diff != "" {
		t.Errorf("sweep bundle (-want +got):\n%s", diff)
	}
}

// TestSweepSparesPluginsNotBackYet: after an agent restart, plugins start
// one after another. A sweep run before a plugin of the persisted layout
// has registered again keeps that plugin's groups and meters (deleting a
// group or meter deletes the flows that use it: its Services would go
// dark until it re-submits them) and its flows; what belongs to nobody
// still goes.
func TestSweepSparesPluginsNotBackYet(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a1, _ := restartedAgent(t, dir)
	register(t, a1, "a", tVal)
	register(t, a1, "b", tRoute)
	a2, sw := restartedAgent(t, dir) // b has not started yet in this process
	register(t, a2, "a", tVal)
	if _, err := a2.Synced(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	cookie := func(c uint64) openflow.FlowCookie { return openflow.FlowCookie{Cookie: c} }
	sw.mu.Lock()
	sw.cookies = []openflow.FlowCookie{
		cookie(pipeline.Cookie(2, 1, 3)), // b's flow of its only round
		cookie(pipeline.Cookie(1, 1, 0)), // a's round of the earlier process
		cookie(pipeline.Cookie(9, 1, 0)), // a prefix nobody has
	}
	sw.groupDescs = []openflow.GroupDesc{{GroupID: pipeline.GroupID(2, 1)}, {GroupID: pipeline.GroupID(1, 9)}, {GroupID: pipeline.GroupID(9, 1)}}
	sw.meters = []openflow.MeterStats{{MeterID: pipeline.MeterID(2, 1)}, {MeterID: pipeline.MeterID(1, 4)}}
	sw.mu.Unlock()
	res, err := a2.SweepForeign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(SweepResult{Flows: 2, Groups: 2, Meters: 1}, res); diff != "" {
		t.Errorf("sweep counts (-want +got):\n%s", diff)
	}
	sw.mu.Lock()
	var groups, meters []uint32
	for _, m := range sw.bundles[len(sw.bundles)-1] {
		if g, ok := m.(*openflow.GroupMod); ok {
			groups = append(groups, g.GroupID)
		}
	}
	for _, m := range sw.requests {
		if mm, ok := m.(*openflow.MeterMod); ok && mm.Command == openflow.MeterDelete {
			meters = append(meters, mm.MeterID)
		}
	}
	sw.mu.Unlock()
	if diff := cmp.Diff([]uint32{pipeline.GroupID(1, 9), pipeline.GroupID(9, 1)}, groups); diff != "" {
		t.Errorf("swept groups (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]uint32{pipeline.MeterID(1, 4)}, meters); diff != "" {
		t.Errorf("swept meters (-want +got):\n%s", diff)
	}

	// Once b is back (a new round of this process) and synced, what it did
	// not write again is its own stale state and goes.
	register(t, a2, "b", tRoute)
	if _, err := a2.Synced(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	sw.mu.Lock()
	sw.cookies, sw.requests = nil, nil
	sw.groupDescs = []openflow.GroupDesc{{GroupID: pipeline.GroupID(2, 1)}}
	sw.meters = []openflow.MeterStats{{MeterID: pipeline.MeterID(2, 1)}}
	sw.mu.Unlock()
	if res, err = a2.SweepForeign(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(SweepResult{Groups: 1, Meters: 1}, res); diff != "" {
		t.Errorf("sweep counts once b is back (-want +got):\n%s", diff)
	}
}

// TestNoSweepBeforeEveryPluginLaunched: the first plugin to sync after an
// agent restart does not trigger the foreign sweep while enabled plugins
// are still to be launched.
func TestNoSweepBeforeEveryPluginLaunched(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	a.cfg.Plugins = []config.Plugin{{Name: "a"}, {Name: "b"}}
	a.plugins["a"] = &runner{state: StateSynced}
	sw.mu.Lock()
	sw.groupDescs = []openflow.GroupDesc{{GroupID: 77}}
	sw.mu.Unlock()
	before := sw.count()
	a.sweepIfAllSynced(ctx)
	if n := sw.count() - before; n != 0 {
		t.Fatalf("swept (%d bundles) with plugin b not launched yet", n)
	}
	a.plugins["b"] = &runner{state: StateSynced}
	a.sweepIfAllSynced(ctx)
	if n := sw.count() - before; n != 1 {
		t.Fatalf("%d sweep bundles once every plugin is synced, want 1", n)
	}
}

// A plugin labels its own ports only, never with the host's keys.
func TestLabelPort(t *testing.T) {
	a, _, db := newTestAgent(t)
	ctx := context.Background()
	register(t, a, "podnet")
	register(t, a, "beta")
	svc := &service{a: a, r: &runner{a: a, spec: config.Plugin{Name: "podnet"}, limiter: newBucket(0, 0)}}
	other := &service{a: a, r: &runner{a: a, spec: config.Plugin{Name: "beta"}, limiter: newBucket(0, 0)}}
	if _, err := svc.CreatePort(ctx, sdk.PortRequest{Name: "syw1", NoWait: true}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		svc   *service
		port  string
		ids   map[string]string
		want  error
		words string
	}{
		{name: "its own port", svc: svc, port: "syw1", ids: map[string]string{"switchyard.dev/pod": "ns/p"}},
		{name: "another plugin's port", svc: other, port: "syw1", ids: map[string]string{"x": "y"}, want: sdk.ErrNotOwner, words: `it belongs to "podnet"`},
		{name: "the owner key", svc: svc, port: "syw1", ids: map[string]string{ovsdb.OwnerKey: "beta"}, want: sdk.ErrInvalid, words: "the host keeps it"},
		{name: "the export key", svc: svc, port: "syw1", ids: map[string]string{ovsdb.ExportedKey: "true"}, want: sdk.ErrInvalid, words: "the host keeps it"},
		{name: "an empty key", svc: svc, port: "syw1", ids: map[string]string{"": "x"}, want: sdk.ErrInvalid, words: "empty external_ids key"},
		{name: "a missing port", svc: svc, port: "nope", ids: map[string]string{"x": "y"}, want: sdk.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.svc.LabelPort(ctx, tc.port, tc.ids)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.words) {
				t.Fatalf("LabelPort: %v, want %v saying %q", err, tc.want, tc.words)
			}
		})
	}
	if err := svc.LabelPort(ctx, "syw1", map[string]string{"switchyard.dev/pod": "", "switchyard.dev/container": "c1"}); err != nil {
		t.Fatal(err)
	}
	p, _ := db.Port(ctx, "syw1")
	if want := map[string]string{"switchyard.dev/container": "c1"}; !maps.Equal(p.ExternalIDs, want) {
		t.Errorf("external_ids %v, want %v (an empty value removes its key)", p.ExternalIDs, want)
	}
}

// A port created with NoWait is reported with the number it was created
// with before the switch attached it; WaitPort confirms that number, and
// refuses a port the switch numbered otherwise, since its creator has
// already installed flows for the requested one.
func TestCreatePortNoWaitAndWaitPort(t *testing.T) {
	a, _, db := newTestAgent(t)
	ctx := context.Background()
	register(t, a, "podnet")
	svc := &service{a: a, r: &runner{a: a, spec: config.Plugin{Name: "podnet"}, limiter: newBucket(0, 0)}}

	p, err := svc.CreatePort(ctx, sdk.PortRequest{Name: "pod0", NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.OFPort != 1 || p.Owner != "podnet" {
		t.Fatalf("CreatePort(NoWait) = %+v; want the picked ofport 1, owner podnet", p)
	}
	if got, err := svc.WaitPort(ctx, "pod0"); err != nil || got.OFPort != 1 {
		t.Errorf("WaitPort(pod0) = %+v, %v; want ofport 1", got, err)
	}

	// Another manager's port held the number: the switch gave another.
	if _, err := svc.CreatePort(ctx, sdk.PortRequest{Name: "pod1", NoWait: true, OFPort: 7}); err != nil {
		t.Fatal(err)
	}
	db.mu.Lock()
	info := db.ports["pod1"]
	info.OFPort = 8
	db.ports["pod1"] = info
	db.mu.Unlock()
	_, err = svc.WaitPort(ctx, "pod1")
	if !errors.Is(err, sdk.ErrSwitch) || !strings.Contains(err.Error(), `gave port "pod1" OpenFlow port 8, not the 7 it was created with`) {
		t.Errorf("WaitPort on a renumbered port: %v", err)
	}
	// Both numbers stay visible, so the port's creator finds the flows it
	// made for the requested one.
	if got, err := svc.Port(ctx, "pod1"); err != nil || got.OFPort != 8 || got.OFPortRequest != 7 {
		t.Errorf("Port(pod1) = %+v, %v; want OFPort 8, OFPortRequest 7", got, err)
	}
	// Without NoWait, a renumbered port is fine: no flows were made for it.
	if p, err := svc.CreatePort(ctx, sdk.PortRequest{Name: "pod1"}); err != nil || p.OFPort != 8 {
		t.Errorf("CreatePort(pod1) of the existing port = %+v, %v; want ofport 8", p, err)
	}

	if _, err := svc.CreatePort(ctx, sdk.PortRequest{Name: "pod3", NoWait: true, OFPort: 1}); !errors.Is(err, sdk.ErrConflict) || !strings.Contains(err.Error(), `OpenFlow port 1 belongs to port "pod0"`) {
		t.Errorf("CreatePort(NoWait) of a number pod0 holds = %v; want ErrConflict naming pod0", err)
	}
	for _, tc := range []struct {
		name string
		req  sdk.PortRequest
		want string
	}{
		{"number out of range", sdk.PortRequest{Name: "pod2", OFPort: 65280}, "OpenFlow port number 65280 is out of range"},
		{"no name", sdk.PortRequest{NoWait: true}, "must be 1-15 characters"},
	} {
		if _, err := svc.CreatePort(ctx, tc.req); !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: CreatePort = %v; want ErrInvalid with %q", tc.name, err, tc.want)
		}
	}
	if _, err := svc.WaitPort(ctx, "nosuch0"); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("WaitPort of a missing port = %v; want ErrNotFound", err)
	}
}
