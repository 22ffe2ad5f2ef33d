package cniserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"switchyard.dev/switchyard/cni/cnierr"
	"switchyard.dev/switchyard/cni/cnipb"
	"switchyard.dev/switchyard/host/ifstore"
	"switchyard.dev/switchyard/sdk"
)

// plugin is the test's stand-in at the plugin seam: it records calls and
// fails or blocks on demand.
type plugin struct {
	mu      sync.Mutex
	calls   []string
	addErr  error
	release chan struct{} // when set, CNIAdd blocks until closed
}

func (p *plugin) record(s string) {
	p.mu.Lock()
	p.calls = append(p.calls, s)
	p.mu.Unlock()
}

func (p *plugin) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

func (p *plugin) CNIAdd(ctx context.Context, args sdk.CNIArgs) (*sdk.CNIAddResponse, error) {
	p.record("add " + args.ContainerID)
	if p.release != nil {
		<-p.release
	}
	if p.addErr != nil {
		return nil, p.addErr
	}
	mac, _ := net.ParseMAC("0a:58:0a:f4:01:05")
	return &sdk.CNIAddResponse{
		IPs:    []sdk.IPConfig{{Address: netip.MustParsePrefix("10.244.1.5/32"), Gateway: netip.MustParseAddr("10.244.1.1")}},
		Routes: []sdk.Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), GW: netip.MustParseAddr("10.244.1.1")}},
		Interface: sdk.PodInterface{IfName: args.IfName, HostIfName: "sy" + args.ContainerID, OFPort: 7, MAC: mac,
			IPs: []netip.Addr{netip.MustParseAddr("10.244.1.5")}},
		MTU: 1450,
	}, nil
}

func (p *plugin) CNIDel(ctx context.Context, args sdk.CNIArgs) error {
	p.record("del " + args.ContainerID + " netns=" + args.Netns)
	return nil
}

func (p *plugin) CNIGC(ctx context.Context, valid []sdk.CNIAttachment, _ []byte) (int, error) {
	var names []string
	for _, v := range valid {
		names = append(names, v.ContainerID)
	}
	p.record("gc valid=" + strings.Join(names, ","))
	return 0, nil
}

func (p *plugin) CNICheck(ctx context.Context, args sdk.CNIArgs) error {
	p.record("check " + args.ContainerID)
	return cnierr.Newf(cnierr.CheckFailed, "veth %s is missing in the pod", args.IfName)
}

type env struct {
	client cnipb.CNIClient
	store  *ifstore.Store
	netns  string
	ready  *bool
}

func start(t *testing.T, p *plugin, o Options) *env {
	t.Helper()
	dir := t.TempDir()
	store, err := ifstore.Open(filepath.Join(dir, "ifstore.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ready := true
	o.Socket = filepath.Join(dir, "cni.sock")
	o.Store = store
	o.Handler = func() (Plugin, bool) { return p, ready }
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Stop(time.Second) })
	cc, err := grpc.NewClient("unix://"+o.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	netns := filepath.Join(dir, "netns")
	os.WriteFile(netns, nil, 0o600)
	return &env{client: cnipb.NewCNIClient(cc), store: store, netns: netns, ready: &ready}
}

const netConf = `{"cniVersion":"1.0.0","name":"sy","type":"switchyard-cni"}`

func (e *env) req(id string) *cnipb.CmdRequest {
	return &cnipb.CmdRequest{ContainerId: id, Netns: e.netns, Ifname: "eth0", CniVersion: "1.0.0",
		Pod: &cnipb.PodRef{Namespace: "default", Name: "p-" + id}, NetConf: []byte(netConf)}
}

func TestAddRecordsAndReturnsResult(t *testing.T) {
	p := &plugin{}
	e := start(t, p, Options{})
	resp, err := e.client.Add(context.Background(), e.req("c1"))
	if err != nil || resp.GetError() != nil {
		t.Fatalf("Add: %v %v", err, resp.GetError())
	}
	if got := resp.GetResult().GetIps()[0].GetAddress(); got != "10.244.1.5/32" {
		t.Errorf("result address %q", got)
	}
	if got := resp.GetResult().GetInterfaces()[1].GetSandbox(); got != e.netns {
		t.Errorf("pod interface sandbox %q, want %q", got, e.netns)
	}
	rec, ok := e.store.Get(ifstore.Key{ContainerID: "c1", IfName: "eth0"})
	if !ok || rec.OFPort != 7 || rec.HostIfName != "syc1" || rec.Pod() != "default/p-c1" {
		t.Errorf("store record = %+v, %v", rec, ok)
	}
	// A second ADD for the same attachment is refused and does not touch
	// the existing one (no rollback DEL).
	resp, _ = e.client.Add(context.Background(), e.req("c1"))
	if resp.GetError().GetCode() != uint32(cnierr.AlreadyAttached) {
		t.Errorf("repeated ADD error = %v, want code %d", resp.GetError(), cnierr.AlreadyAttached)
	}
	if diff := cmp.Diff([]string{"add c1"}, p.Calls()); diff != "" {
		t.Errorf("plugin calls (-want +got):\n%s", diff)
	}
	if _, ok := e.store.Get(ifstore.Key{ContainerID: "c1", IfName: "eth0"}); !ok {
		t.Error("repeated ADD removed the existing record")
	}
}

func TestAddFailureRollsBack(t *testing.T) {
	p := &plugin{addErr: fmt.Errorf("podnet: %w", cnierr.New(cnierr.IPAMExhausted, "pod CIDR 10.244.1.0/30 is exhausted", "free addresses"))}
	e := start(t, p, Options{})
	resp, err := e.client.Add(context.Background(), e.req("c2"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetError().GetCode() != uint32(cnierr.IPAMExhausted) {
		t.Errorf("error = %v, want IPAM exhausted", resp.GetError())
	}
	if diff := cmp.Diff([]string{"add c2", "del c2 netns=" + e.netns}, p.Calls()); diff != "" {
		t.Errorf("plugin calls (-want +got):\n%s", diff)
	}
	if n := len(e.store.List()); n != 0 {
		t.Errorf("store holds %d records after a failed ADD", n)
	}
}

func TestValidationAndReadiness(t *testing.T) {
	p := &plugin{}
	e := start(t, p, Options{})
	mod := func(f func(*cnipb.CmdRequest)) *cnipb.CmdRequest { r := e.req("c3"); f(r); return r }
	tests := []struct {
		name string
		req  *cnipb.CmdRequest
		code uint
	}{
		{"bad container id", mod(func(r *cnipb.CmdRequest) { r.ContainerId = "../etc" }), types.ErrInvalidEnvironmentVariables},
		{"bad ifname", mod(func(r *cnipb.CmdRequest) { r.Ifname = "this-name-is-too-long" }), types.ErrInvalidEnvironmentVariables},
		{"no pod", mod(func(r *cnipb.CmdRequest) { r.Pod = nil }), types.ErrInvalidEnvironmentVariables},
		{"missing netns", mod(func(r *cnipb.CmdRequest) { r.Netns = "/var/run/netns/does-not-exist" }), types.ErrInvalidNetNS},
		{"bad conf", mod(func(r *cnipb.CmdRequest) { r.NetConf = []byte(`{`) }), types.ErrInvalidNetworkConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := e.client.Add(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetError().GetCode(); got != uint32(tc.code) {
				t.Errorf("code = %d (%v), want %d", got, resp.GetError(), tc.code)
			}
		})
	}
	if len(p.Calls()) != 0 {
		t.Errorf("invalid requests reached the plugin: %v", p.Calls())
	}
	*e.ready = false
	resp, _ := e.client.Add(context.Background(), e.req("c3"))
	if resp.GetError().GetCode() != uint32(types.ErrTryAgainLater) {
		t.Errorf("ADD while not ready = %v, want try again later", resp.GetError())
	}
	st, _ := e.client.Status(context.Background(), &cnipb.StatusRequest{NetConf: []byte(netConf)})
	if st.GetError().GetCode() != uint32(types.ErrPluginNotAvailable) {
		t.Errorf("STATUS while not ready = %v, want 50", st.GetError())
	}
	// DEL of a never-added container succeeds even with no plugin.
	del, _ := e.client.Del(context.Background(), e.req("never"))
	if del.GetError() != nil {
		t.Errorf("DEL of unknown container while not ready: %v", del.GetError())
	}
}

func TestDelIdempotentAndCheck(t *testing.T) {
	p := &plugin{}
	e := start(t, p, Options{})
	e.client.Add(context.Background(), e.req("c4"))
	ch, _ := e.client.Check(context.Background(), e.req("c4"))
	if ch.GetError().GetCode() != uint32(cnierr.CheckFailed) || ch.GetError().GetMsg() != "veth eth0 is missing in the pod" {
		t.Errorf("CHECK = %v", ch.GetError())
	}
	ch, _ = e.client.Check(context.Background(), e.req("unknown"))
	if ch.GetError().GetCode() != uint32(types.ErrUnknownContainer) {
		t.Errorf("CHECK unknown = %v", ch.GetError())
	}
	gone := e.req("c4")
	gone.Netns = ""
	gone.Pod = nil
	for i := range 2 {
		resp, err := e.client.Del(context.Background(), gone)
		if err != nil || resp.GetError() != nil {
			t.Fatalf("DEL #%d: %v %v", i, err, resp.GetError())
		}
	}
	// The first DEL filled the vanished netns in from the record.
	calls := p.Calls()
	if calls[2] != "del c4 netns="+e.netns || calls[3] != "del c4 netns=" {
		t.Errorf("plugin calls = %q", calls)
	}
	if n := len(e.store.List()); n != 0 {
		t.Errorf("store holds %d records after DEL", n)
	}
}

func TestSameContainerSerializedWithBoundedWait(t *testing.T) {
	p := &plugin{release: make(chan struct{})}
	e := start(t, p, Options{LockWait: 200 * time.Millisecond})
	first := make(chan *cnipb.AddResponse)
	go func() {
		r, _ := e.client.Add(context.Background(), e.req("c5"))
		first <- r
	}()
	// Wait (bounded) until the first ADD is inside the plugin.
	deadline := time.Now().Add(10 * time.Second)
	for len(p.Calls()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("first ADD never reached the plugin within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, _ := e.client.Del(context.Background(), e.req("c5"))
	if resp.GetError().GetCode() != uint32(types.ErrTryAgainLater) {
		t.Errorf("DEL during ADD = %v, want try again later", resp.GetError())
	}
	// Another container is not held up.
	other, _ := e.client.Check(context.Background(), e.req("c6"))
	if other.GetError().GetCode() != uint32(types.ErrUnknownContainer) {
		t.Errorf("CHECK of an unrelated container = %v", other.GetError())
	}
	close(p.release)
	if r := <-first; r.GetError() != nil {
		t.Errorf("first ADD: %v", r.GetError())
	}
}

func TestGCReleasesUnlisted(t *testing.T) {
	p := &plugin{}
	e := start(t, p, Options{})
	for _, id := range []string{"a", "b", "c"} {
		e.client.Add(context.Background(), e.req(id))
	}
	resp, err := e.client.GC(context.Background(), &cnipb.GCRequest{NetConf: []byte(netConf),
		ValidAttachments: []*cnipb.Attachment{{ContainerId: "b", Ifname: "eth0"}}})
	if err != nil || resp.GetError() != nil {
		t.Fatalf("GC: %v %v", err, resp.GetError())
	}
	var left []string
	for _, r := range e.store.List() {
		left = append(left, r.ContainerID)
	}
	if diff := cmp.Diff([]string{"b"}, left); diff != "" {
		t.Errorf("records after GC (-want +got):\n%s", diff)
	}
	// The host detaches its own stale records first, then the plugin gets
	// the runtime's list for what the host never recorded.
	var calls []string
	for _, c := range p.Calls() {
		calls = append(calls, strings.Fields(c)[0]+" "+strings.Fields(c)[1])
	}
	if diff := cmp.Diff([]string{"del a", "del c", "gc valid=b"}, calls[len(calls)-3:]); diff != "" {
		t.Errorf("plugin calls of the GC (-want +got):\n%s", diff)
	}
}

func TestNewRequiresHandlerAndStore(t *testing.T) {
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "Handler is required") {
		t.Fatalf("New without handler: err = %v", err)
	}
	h := func() (Plugin, bool) { return nil, false }
	if _, err := New(Options{Handler: h}); err == nil || !strings.Contains(err.Error(), "Store is required") {
		t.Fatalf("New without store: err = %v", err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// An ADD that arrives before the agent is ready is held by WaitReady and,
// when that gives up, fails with "try again later" naming what is missing;
// the plugin is never called.
func TestAddWaitsForReadiness(t *testing.T) {
	p := &plugin{}
	e := start(t, p, Options{WaitReady: func(context.Context) error {
		return errors.New("switchyard agent is not ready after 10s: node facts: Node n1 has no pod CIDR yet")
	}})
	resp, err := e.client.Add(context.Background(), e.req("early"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetError().GetCode() != uint32(types.ErrTryAgainLater) || !strings.Contains(resp.GetError().GetMsg(), "has no pod CIDR yet") {
		t.Errorf("early ADD = %v, want code 11 naming the missing pod CIDR", resp.GetError())
	}
	if len(p.Calls()) != 0 {
		t.Errorf("an ADD before readiness reached the plugin: %v", p.Calls())
	}
}

// TestBeginBracketsPodRequests checks that Options.Begin sees every ADD,
// DEL and CHECK in flight, including refused ones, and each one ended.
func TestBeginBracketsPodRequests(t *testing.T) {
	var mu sync.Mutex
	inflight, begun, maxInflight := 0, 0, 0
	p := &plugin{}
	e := start(t, p, Options{Begin: func() func() {
		mu.Lock()
		defer mu.Unlock()
		inflight++
		begun++
		maxInflight = max(maxInflight, inflight)
		return func() {
			mu.Lock()
			inflight--
			mu.Unlock()
		}
	}})
	ctx := context.Background()
	e.client.Add(ctx, e.req("b1"))
	e.client.Check(ctx, e.req("b1"))
	e.client.Del(ctx, e.req("b1"))
	bad := e.req("b2")
	bad.NetConf = []byte("{")
	e.client.Add(ctx, bad) // refused in validation, still bracketed
	mu.Lock()
	defer mu.Unlock()
	if begun != 4 || inflight != 0 || maxInflight != 1 {
		t.Errorf("Begin called %d times (want 4), %d still in flight (want 0), at most %d at once (want 1)", begun, inflight, maxInflight)
	}
}
