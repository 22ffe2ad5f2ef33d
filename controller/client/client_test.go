package client

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
)

// fakeController serves scripted streams: each Watch takes the next script,
// sends its events, then ends the stream with its error (or blocks until
// the client leaves when the script says so).
type fakeController struct {
	apiv1.UnimplementedPolicyDistributionServer
	scripts chan script

	mu       sync.Mutex
	requests []*apiv1.WatchRequest
}

type script struct {
	events []*apiv1.WatchEvent
	hold   bool  // keep the stream open after the events
	err    error // how the stream ends when not held
}

func (f *fakeController) Watch(req *apiv1.WatchRequest, stream grpc.ServerStreamingServer[apiv1.WatchEvent]) error {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	var sc script
	select {
	case sc = <-f.scripts:
	case <-stream.Context().Done():
		return stream.Context().Err()
	}
	for _, ev := range sc.events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	if sc.hold {
		<-stream.Context().Done()
		return stream.Context().Err()
	}
	return sc.err
}

func (f *fakeController) watchRequests() []*apiv1.WatchRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*apiv1.WatchRequest(nil), f.requests...)
}

func startFake(t *testing.T) (*fakeController, []grpc.DialOption) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	f := &fakeController{scripts: make(chan script, 8)}
	gs := grpc.NewServer()
	apiv1.RegisterPolicyDistributionServer(gs, f)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	dial := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })
	return f, []grpc.DialOption{dial}
}

// recorder is a Handler that logs what it is handed.
type recorder struct {
	mu  sync.Mutex
	log []string
	ups []bool
}

func (r *recorder) Replace(s *State) {
	r.add("replace " + describeState(s))
}

func (r *recorder) Apply(s *State, c Change) {
	r.add(c.Kind.String() + " +" + names(c.Added) + " -" + names(c.Removed) + " => " + describeState(s))
}

func (r *recorder) StreamChanged(up bool, _ error) {
	r.mu.Lock()
	r.ups = append(r.ups, up)
	r.mu.Unlock()
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

func names(ms []*apiv1.Member) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// describeState renders policies and groups in a stable order.
func describeState(s *State) string {
	var out []string
	for uid := range s.Policies {
		out = append(out, "p:"+uid)
	}
	for id, g := range s.AppliedToGroups {
		var ms []*apiv1.Member
		for _, m := range g.Members {
			ms = append(ms, m)
		}
		out = append(out, "atg"+string(rune('0'+id))+":"+names(ms))
	}
	for id, g := range s.AddressGroups {
		var ms []*apiv1.Member
		for _, m := range g.Members {
			ms = append(ms, m)
		}
		out = append(out, "ag"+string(rune('0'+id))+":"+names(ms))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func pod(name string) *apiv1.Member {
	return &apiv1.Member{Namespace: "ns", Name: name, Node: "n1", Ips: [][]byte{{10, 0, 0, byte(len(name))}}}
}

// stamp numbers events as the controller does: a snapshot (Reset to
// Synced) and a Resumed/Synced pair carry version v, and every later event
// the next version.
func stamp(epoch string, v uint64, evs ...*apiv1.WatchEvent) []*apiv1.WatchEvent {
	inSnap := false
	for _, ev := range evs {
		switch ev.Event.(type) {
		case *apiv1.WatchEvent_Reset_:
			inSnap = true
		case *apiv1.WatchEvent_Resumed:
		case *apiv1.WatchEvent_Synced:
			inSnap = false
		default:
			if !inSnap {
				v++
			}
		}
		ev.Epoch, ev.Version = epoch, v
	}
	return evs
}

func reset() *apiv1.WatchEvent {
	return &apiv1.WatchEvent{Event: &apiv1.WatchEvent_Reset_{Reset_: &apiv1.Reset{Reason: "test"}}}
}
func synced() *apiv1.WatchEvent {
	return &apiv1.WatchEvent{Event: &apiv1.WatchEvent_Synced{Synced: &apiv1.Synced{}}}
}
func resumed() *apiv1.WatchEvent {
	return &apiv1.WatchEvent{Event: &apiv1.WatchEvent_Resumed{Resumed: &apiv1.Resumed{}}}
}
func policy(uid string, atg uint32) *apiv1.WatchEvent {
	return &apiv1.WatchEvent{Event: &apiv1.WatchEvent_PolicyUpsert{PolicyUpsert: &apiv1.Policy{Uid: uid, AppliedToGroups: []uint32{atg}}}}
}
func atg(id uint32, ms ...*apiv1.Member) *apiv1.WatchEvent {
	return &apiv1.WatchEvent{Event: &apiv1.WatchEvent_AppliedToGroupUpsert{AppliedToGroupUpsert: &apiv1.Group{Id: id, Members: ms}}}
}
func agPatch(id uint32, added, removed []*apiv1.Member) *apiv1.WatchEvent {
	return &apiv1.WatchEvent{Event: &apiv1.WatchEvent_AddressGroupPatch{AddressGroupPatch: &apiv1.GroupPatch{Id: id, Added: added, Removed: removed}}}
}
func ag(id uint32, ms ...*apiv1.Member) *apiv1.WatchEvent {
	return &apiv1.WatchEvent{Event: &apiv1.WatchEvent_AddressGroupUpsert{AddressGroupUpsert: &apiv1.Group{Id: id, Members: ms}}}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func run(t *testing.T, cfg Config) (*Client, func()) {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return c, func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
		c.Close()
	}
}

func TestSnapshotThenChangesThenResume(t *testing.T) {
	f, dial := startFake(t)
	rec := &recorder{}
	var tokens int
	var tokMu sync.Mutex
	c, stop := run(t, Config{Address: "passthrough:///fake", NodeName: "n1", Handler: rec, DialOptions: dial,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Token: func(context.Context) (string, error) {
			tokMu.Lock()
			defer tokMu.Unlock()
			tokens++
			return "tok", nil
		}})
	defer stop()

	// First stream: snapshot, one patch, then the stream breaks.
	f.scripts <- script{events: stamp("e1", 7,
		reset(), atg(1, pod("a")), ag(2, pod("b")), policy("p1", 1), synced(),
		agPatch(2, []*apiv1.Member{pod("c")}, []*apiv1.Member{pod("b")}),
	), err: status.Error(codes.Unavailable, "gone")}
	// Second: resumed from the last applied version, one missed patch.
	f.scripts <- script{events: stamp("e1", 8, resumed(), synced(), agPatch(2, []*apiv1.Member{pod("d")}, nil)), hold: true}

	waitFor(t, "the missed patch", func() bool { return len(rec.lines()) == 3 })
	want := []string{
		"replace ag2:b atg1:a p:p1",
		"ag-patch +c -b => ag2:c atg1:a p:p1",
		"ag-patch +d - => ag2:c,d atg1:a p:p1",
	}
	if diff := cmp.Diff(want, rec.lines()); diff != "" {
		t.Fatalf("handler calls (-want +got):\n%s", diff)
	}
	reqs := f.watchRequests()
	if len(reqs) != 2 || reqs[0].ResumeEpoch != "" || reqs[1].ResumeEpoch != "e1" || reqs[1].ResumeVersion != 8 {
		t.Fatalf("watch requests %v: want a fresh one, then a resume from e1/8", reqs)
	}
	waitFor(t, "synced", c.Synced)
	tokMu.Lock()
	if tokens != 2 {
		t.Errorf("token asked %d times, want once per connect (2)", tokens)
	}
	tokMu.Unlock()
}

// A Reset in the middle of a stream (the node fell behind) must keep the
// old span in force until the new snapshot is complete.
func TestResetKeepsOldStateUntilSynced(t *testing.T) {
	f, dial := startFake(t)
	rec := &recorder{}
	c, stop := run(t, Config{Address: "passthrough:///fake", NodeName: "n1", Handler: rec, DialOptions: dial})
	defer stop()

	f.scripts <- script{events: stamp("e1", 1, reset(), atg(1, pod("a")), policy("p1", 1), synced(), reset(), atg(1, pod("z"))), hold: true}
	waitFor(t, "the second snapshot's first group", func() bool {
		return len(rec.lines()) == 1 && !c.Synced()
	})
	// Give the client time to (wrongly) apply the half snapshot.
	time.Sleep(50 * time.Millisecond)
	var mid string
	c.View(func(s *State) { mid = describeState(s) })
	if mid != "atg1:a p:p1" {
		t.Fatalf("during a snapshot the state is %q, want the old span", mid)
	}
}

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.pb")
	if _, err := Load(path); !errors.Is(err, ErrNoState) {
		t.Fatalf("Load of a missing file: %v, want ErrNoState", err)
	}
	s := NewState()
	for _, ev := range stamp("e9", 41, atg(1, pod("a"), pod("bb")), ag(2, pod("c")), policy("p1", 1), policy("p2", 1)) {
		s.apply(ev)
	}
	s.Epoch, s.Version = "e9", 44
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if describeState(got) != describeState(s) || got.Epoch != "e9" || got.Version != 44 {
		t.Fatalf("loaded %q @%s/%d, saved %q @e9/44", describeState(got), got.Epoch, got.Version, describeState(s))
	}
	b, _ := os.ReadFile(path)
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"cut short", "cut short", b[:len(b)-3]},
		{"garbage", "event 0", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"no reset", "before Reset", stampBytes(t, policy("p", 1))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			os.WriteFile(p, tc.data, 0o600)
			if _, err := Load(p); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func stampBytes(t *testing.T, evs ...*apiv1.WatchEvent) []byte {
	p := filepath.Join(t.TempDir(), "x")
	f, _ := os.Create(p)
	for _, ev := range evs {
		if _, err := marshalDelimited(f, ev); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	b, _ := os.ReadFile(p)
	return b
}

// A consumer restarted with a saved state resumes instead of resnapshotting.
func TestInitialStateResumes(t *testing.T) {
	f, dial := startFake(t)
	init := NewState()
	init.apply(policy("p1", 1))
	init.Epoch, init.Version = "e3", 12
	rec := &recorder{}
	_, stop := run(t, Config{Address: "passthrough:///fake", NodeName: "n1", Handler: rec, DialOptions: dial, Initial: init})
	defer stop()
	f.scripts <- script{events: stamp("e3", 12, resumed(), synced()), hold: true}
	waitFor(t, "the resume request", func() bool { return len(f.watchRequests()) == 1 })
	r := f.watchRequests()[0]
	if r.ResumeEpoch != "e3" || r.ResumeVersion != 12 {
		t.Fatalf("resume from %s/%d, want e3/12", r.ResumeEpoch, r.ResumeVersion)
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{NodeName: "n", Handler: &recorder{}}, "no controller address"},
		{Config{Address: "x:1", Handler: &recorder{}}, "no node name"},
		{Config{Address: "x:1", NodeName: "n"}, "no Handler"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

func FuzzLoad(f *testing.F) {
	s := NewState()
	for _, ev := range stamp("e", 1, atg(1, pod("a")), ag(2, pod("b")), policy("p", 1)) {
		s.apply(ev)
	}
	dir := f.TempDir()
	p := filepath.Join(dir, "seed")
	if err := s.Save(p); err != nil {
		f.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "state")
		os.WriteFile(p, data, 0o600)
		got, err := Load(p)
		if err != nil {
			return
		}
		// Whatever loads must save and load back to the same span.
		p2 := p + ".2"
		if err := got.Save(p2); err != nil {
			t.Fatal(err)
		}
		again, err := Load(p2)
		if err != nil {
			t.Fatalf("reloading a saved state: %v", err)
		}
		if describeState(again) != describeState(got) {
			t.Fatalf("round trip changed the state: %q vs %q", describeState(again), describeState(got))
		}
	})
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
