package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/sdkhost"
)

// The test binary doubles as a plugin: with SDK_TEST_PLUGIN set, TestMain
// serves testFeature instead of running tests, the way a real plugin main
// calls sdk.Serve. That puts a real process, handshake and broker between
// the halves.
func TestMain(m *testing.M) {
	if v := os.Getenv("SDK_TEST_PLUGIN"); v != "" {
		n, _ := strconv.Atoi(v)
		var f sdk.Feature = &testFeature{}
		if os.Getenv("SDK_TEST_FEATURE") == "bare" {
			f = bareFeature{}
		}
		sdk.ServeVersion(f, n, os.Stderr)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type testFeature struct{}

// bareFeature has no optional capabilities.
type bareFeature struct{}

func (bareFeature) Describe(_ context.Context, _ sdk.DescribeRequest, r *sdk.DescribeResponse) error {
	r.Name = "bare"
	return nil
}
func (bareFeature) Start(context.Context, sdk.StartRequest, *sdk.StartResponse) error { return nil }

var (
	podIP   = netip.MustParsePrefix("10.10.0.5/24")
	podMAC  = net.HardwareAddr{2, 0, 0, 0, 0, 5}
	wantPod = sdk.PodInterface{PodNamespace: "ns", PodName: "p", ContainerID: "c1", IfName: "eth0", HostIfName: "veth1", OFPort: 7, MAC: podMAC, IPs: []netip.Addr{podIP.Addr()}}
)

func (testFeature) CNIAdd(_ context.Context, req sdk.CNIAddRequest, resp *sdk.CNIAddResponse) error {
	if req.Args.ContainerID != "c1" || req.Args.PodName != "p" || string(req.Args.NetConf) != `{"cniVersion":"1.1.0","mtu":1400}` || req.Args.MTU != 1400 {
		return fmt.Errorf("CNI args arrived as %+v", req.Args)
	}
	resp.IPs = []sdk.IPConfig{{Address: podIP, Gateway: netip.MustParseAddr("10.10.0.1")}}
	resp.Routes = []sdk.Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), GW: netip.MustParseAddr("10.10.0.1")}}
	resp.Interface, resp.MTU = wantPod, 1450
	return nil
}

func (testFeature) CNIDel(_ context.Context, req sdk.CNIDelRequest, _ *sdk.CNIDelResponse) error {
	return fmt.Errorf("%w: container %s", sdk.ErrNotFound, req.Args.ContainerID)
}

func (testFeature) CNICheck(_ context.Context, req sdk.CNICheckRequest, _ *sdk.CNICheckResponse) error {
	if req.Args.ContainerID == "broken" {
		return fmt.Errorf("checking %s: %w", req.Args.ContainerID, &sdk.CNIError{Code: 104, Msg: "veth gone", Details: "delete and re-add the pod"})
	}
	return nil
}

func (testFeature) PodInterfaceEvent(_ context.Context, req sdk.PodInterfaceEventRequest, _ *sdk.PodInterfaceEventResponse) error {
	if req.Kind != sdk.PodInterfaceAdded || fmt.Sprintf("%+v", req.Interface) != fmt.Sprintf("%+v", wantPod) {
		return fmt.Errorf("pod interface event arrived as %+v", req)
	}
	return nil
}

func (testFeature) NodeEvent(_ context.Context, req sdk.NodeEventRequest, _ *sdk.NodeEventResponse) error {
	if req.Kind != sdk.NodeUpdated || req.Node.Name != "n2" || req.Node.PodCIDRs[0].String() != "10.10.2.0/24" || req.Node.NodeIPs[0].String() != "192.0.2.2" {
		return fmt.Errorf("node event arrived as %+v", req)
	}
	return nil
}

var (
	markField = flow.Field{Name: "mark", Width: 8}
	testFlow  = flow.Flow{Table: "t.class", Priority: 100, Match: flow.Match{}.InPort(1).IPv4(), Tag: 42,
		Actions: []flow.Action{flow.LoadField(markField, 7), flow.Conntrack(flow.CT{Commit: true, Zone: 3, Resume: flow.GotoStage(flow.StageOutput)})},
		Goto:    flow.NextTable()}
)

func (testFeature) Describe(_ context.Context, req sdk.DescribeRequest, r *sdk.DescribeResponse) error {
	r.Name, r.Version = "t", "1.2.3"
	r.Tables = []sdk.Table{{Name: "t.class", Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier, Miss: sdk.MissNext, Exported: true}}
	if string(req.Config) == `{"badResource":true}` {
		r.Resources = []sdk.Resource{{Kind: 99, Name: "t.odd"}}
	}
	if string(req.Config) == `{"second":true}` { // what it declares may depend on its config
		r.Tables = append(r.Tables, sdk.Table{Name: "t.second", Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier, After: []string{"t.class"}})
	}
	r.Fields = []flow.Field{markField}
	r.EncapOverhead = 50
	return nil
}

func (testFeature) NodeFactsChanged(_ context.Context, req sdk.NodeFactsChangedRequest, _ *sdk.NodeFactsChangedResponse) error {
	if req.Old.PodMTU != 1450 || req.New.PodMTU != 1400 || req.New.Uplink != "eth0" || len(req.New.ExternalIPs) != 1 {
		return fmt.Errorf("node facts change lost fields: %+v", req)
	}
	return nil
}

func (testFeature) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	h := req.Host
	h.Logger().Info("hello from plugin", "tables", len(req.Assignment.Tables), "config", string(req.Config))
	b := flow.NewBatch().AddFlows(testFlow).AddGroup(flow.Group{ID: 1, Type: flow.GroupSelect, Buckets: []flow.Bucket{{Weight: 1, Actions: []flow.Action{flow.Output(2)}}}})
	if err := h.Apply(ctx, b); err != nil {
		return err
	}
	// The host refuses the second batch with ErrConflict; the sentinel must
	// survive the wire.
	err := h.Apply(ctx, flow.NewBatch().AddFlows(flow.Flow{Table: "other"}))
	if !errors.Is(err, sdk.ErrConflict) {
		return fmt.Errorf("second Apply: got %v, want ErrConflict", err)
	}
	p, err := h.CreatePort(ctx, sdk.PortRequest{Name: "p0", Type: "internal", Options: map[string]string{"k": "v"}})
	if err != nil {
		return err
	}
	if p.OFPort != 9 {
		return fmt.Errorf("CreatePort ofport = %d, want 9", p.OFPort)
	}
	// LabelPort crosses the wire, and so does its refusal's sentinel.
	l, ok := h.(sdk.PortLabeler)
	if !ok {
		return errors.New("the host is not a PortLabeler")
	}
	if err := l.LabelPort(ctx, "p0", map[string]string{"switchyard.dev/pod": "ns/p", "gone": ""}); err != nil {
		return fmt.Errorf("LabelPort: %w", err)
	}
	if err := l.LabelPort(ctx, "theirs", map[string]string{"x": "y"}); !errors.Is(err, sdk.ErrNotOwner) {
		return fmt.Errorf("LabelPort of another plugin's port: %v, want ErrNotOwner", err)
	}
	facts, err := h.NodeFacts(ctx)
	if err != nil {
		return err
	}
	if facts.Name != "node-1" || facts.PodCIDRs[0].String() != "10.10.0.0/24" {
		return fmt.Errorf("node facts = %+v", facts)
	}
	// Read-back crosses the wire both ways: the filter out, flows and
	// counters back.
	fs, err := h.Flows(ctx, sdk.FlowFilter{Table: "t.class", Tag: 42, TagMask: 0xff})
	if err != nil {
		return err
	}
	if len(fs) != 1 || fs[0].Flow.String() != testFlow.String() || fs[0].Packets != 7 || fs[0].Bytes != 700 || fs[0].Duration != 2*time.Second {
		return fmt.Errorf("Flows = %+v", fs)
	}
	gs, err := h.GroupStats(ctx, 1)
	if err != nil || len(gs) != 1 || gs[0].ID != 1 || gs[0].Buckets[0].Packets != 5 {
		return fmt.Errorf("GroupStats = %+v, %v", gs, err)
	}
	if _, err := h.MeterStats(ctx, 9); !errors.Is(err, sdk.ErrNotFound) {
		return fmt.Errorf("MeterStats of a missing meter: %v, want ErrNotFound", err)
	}
	// The cluster endpoints came in the Start request; the token comes from
	// the host on demand, and is reused for a while.
	if req.Cluster.APIServer.URL != "https://192.0.2.1:6443" || string(req.Cluster.Controller.CAPEM) != "ca" {
		return fmt.Errorf("cluster access = %+v", req.Cluster)
	}
	for range 2 {
		tok, err := req.Cluster.Tokens.Token(ctx)
		if err != nil || tok != "tok-1" {
			return fmt.Errorf("token = %q, %v", tok, err)
		}
	}
	return h.Synced(ctx)
}

func (testFeature) PacketIn(_ context.Context, req sdk.PacketInRequest, _ *sdk.PacketInResponse) error {
	if string(req.Data) != "ping" {
		return fmt.Errorf("packet-in data %q", req.Data)
	}
	if req.Field(markField) != 3 || req.Field(flow.FieldPacketSource) != 1 {
		return fmt.Errorf("packet-in fields %v", req.Fields)
	}
	if req.CT.State != flow.CTTracked|flow.CTEstablished || req.CT.Zone != 5 || req.CT.Label[15] != 1 ||
		req.CT.Tuple == nil || req.CT.Tuple.Dst != netip.MustParseAddr("10.0.0.2") || req.CT.Tuple.DstPort != 80 {
		return fmt.Errorf("packet-in ct %+v", req.CT)
	}
	return nil
}

// fakeHost is the HostService seam: it records what the plugin sent.
type fakeHost struct {
	mu      sync.Mutex
	batches []*flow.Batch
	synced  bool
	tokens  int
	labels  map[string]map[string]string
}

func (f *fakeHost) LabelPort(_ context.Context, name string, ids map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != "p0" {
		return fmt.Errorf("%w: port %q belongs to another plugin", sdk.ErrNotOwner, name)
	}
	if f.labels == nil {
		f.labels = map[string]map[string]string{}
	}
	f.labels[name] = ids
	return nil
}

func (f *fakeHost) Token(context.Context) (string, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens++
	return fmt.Sprintf("tok-%d", f.tokens), time.Now().Add(time.Hour), nil
}

func (f *fakeHost) Apply(_ context.Context, b *flow.Batch) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.batches) == 1 {
		return fmt.Errorf("%w: plugin %q: flow already held by plugin %q", sdk.ErrConflict, "t", "other")
	}
	f.batches = append(f.batches, b)
	return nil
}
func (f *fakeHost) CreatePort(_ context.Context, r sdk.PortRequest) (sdk.Port, error) {
	return sdk.Port{Name: r.Name, OFPort: 9, Owner: "t"}, nil
}
func (f *fakeHost) WaitPort(_ context.Context, n string) (sdk.Port, error) {
	return sdk.Port{Name: n, OFPort: 9, Owner: "t"}, nil
}
func (f *fakeHost) DeletePort(context.Context, string) error { return nil }
func (f *fakeHost) Port(_ context.Context, n string) (sdk.Port, error) {
	return sdk.Port{}, fmt.Errorf("%w: port %q", sdk.ErrNotFound, n)
}
func (f *fakeHost) PacketOut(context.Context, sdk.PacketOut) error { return nil }
func (f *fakeHost) NodeFacts(context.Context) (sdk.NodeFacts, error) {
	return sdk.NodeFacts{Name: "node-1", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.0.0/24")}, MTU: 1450}, nil
}
func (f *fakeHost) Flows(_ context.Context, ff sdk.FlowFilter) ([]sdk.FlowStats, error) {
	if ff != (sdk.FlowFilter{Table: "t.class", Tag: 42, TagMask: 0xff}) {
		return nil, fmt.Errorf("%w: filter %+v", sdk.ErrInvalid, ff)
	}
	return []sdk.FlowStats{{Flow: testFlow, Packets: 7, Bytes: 700, Duration: 2 * time.Second}}, nil
}
func (f *fakeHost) GroupStats(_ context.Context, ids ...uint32) ([]sdk.GroupStats, error) {
	return []sdk.GroupStats{{ID: ids[0], Packets: 5, Buckets: []sdk.Counter{{Packets: 5, Bytes: 50}}}}, nil
}
func (f *fakeHost) MeterStats(_ context.Context, ids ...uint32) ([]sdk.MeterStats, error) {
	return nil, fmt.Errorf("%w: meter %d", sdk.ErrNotFound, ids[0])
}
func (f *fakeHost) Synced(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = true
	return nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func launch(t *testing.T, version int, logs *syncBuffer, env ...string) (*sdkhost.Plugin, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var logger *slog.Logger
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p, err := sdkhost.Launch(sdkhost.Config{Name: "t", Path: exe, Env: append([]string{"SDK_TEST_PLUGIN=" + strconv.Itoa(version)}, env...), Logger: logger})
	if p != nil {
		t.Cleanup(p.Kill)
	}
	return p, err
}

func TestPluginRoundTrip(t *testing.T) {
	logs := &syncBuffer{}
	p, err := launch(t, sdk.APIVersion, logs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	desc, caps, err := p.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantDesc := &sdk.DescribeResponse{Name: "t", Version: "1.2.3",
		Tables: []sdk.Table{{Name: "t.class", Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier, Miss: sdk.MissNext, Exported: true}},
		Fields: []flow.Field{markField}, EncapOverhead: 50}
	if diff := cmp.Diff(wantDesc, desc); diff != "" {
		t.Errorf("describe (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]sdk.Capability{sdk.CapCNI, sdk.CapPodInterface, sdk.CapPacketIn, sdk.CapNodeEvents, sdk.CapNodeFacts}, caps); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}

	host := &fakeHost{}
	err = p.Start(ctx, sdkhost.StartArgs{
		Assignment: sdk.Assignment{Tables: map[string]uint8{"t.class": 0}, Fields: map[string]flow.Bits{"mark": {Reg: 2, Width: 8}}, CookiePrefix: 1, Round: 1},
		Node:       sdk.NodeFacts{Name: "node-1"}, Config: []byte(`{"x":1}`), Service: host,
		Cluster: sdk.Cluster{APIServer: sdk.Endpoint{URL: "https://192.0.2.1:6443"}, Controller: sdk.Endpoint{URL: "192.0.2.1:10349", CAPEM: []byte("ca")}},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	host.mu.Lock()
	if host.tokens != 1 {
		t.Errorf("the plugin asked the host for a token %d times for two uses within a minute, want 1", host.tokens)
	}
	if !host.synced || len(host.batches) != 1 {
		t.Fatalf("synced=%v batches=%d, want synced after one batch", host.synced, len(host.batches))
	}
	// An empty value (remove the key) survives the wire too.
	if want := map[string]string{"switchyard.dev/pod": "ns/p", "gone": ""}; !maps.Equal(host.labels["p0"], want) {
		t.Errorf("LabelPort arrived as %v, want %v", host.labels["p0"], want)
	}
	got := host.batches[0]
	host.mu.Unlock()
	// Groups and meters arrive before the flows (the order the host applies them in).
	want := flow.NewBatch().AddGroup(flow.Group{ID: 1, Type: flow.GroupSelect, Buckets: []flow.Bucket{{Weight: 1, Actions: []flow.Action{flow.Output(2)}}}}).AddFlows(testFlow)
	var gotText, wantText []string
	for i := range want.Ops {
		wantText = append(wantText, want.Ops[i].String())
		gotText = append(gotText, got.Ops[i].String())
	}
	if diff := cmp.Diff(wantText, gotText); diff != "" {
		t.Errorf("batch over the wire (-want +got):\n%s", diff)
	}
	pi := sdk.PacketInRequest{Table: "t.class", Data: []byte("ping"), Fields: map[string]uint32{"mark": 3, flow.FieldPacketSource.Name: 1},
		CT: sdk.CTInfo{State: flow.CTTracked | flow.CTEstablished, Zone: 5, Label: [16]byte{15: 1},
			Tuple: &sdk.CTTuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 6, SrcPort: 1234, DstPort: 80}}}
	if err := p.PacketIn(ctx, pi); err != nil {
		t.Errorf("PacketIn: %v", err)
	}
	res, err := p.CNIAdd(ctx, sdk.CNIArgs{ContainerID: "c1", PodName: "p", NetConf: []byte(`{"cniVersion":"1.1.0","mtu":1400}`), MTU: 1400})
	if err != nil {
		t.Fatalf("CNIAdd: %v", err)
	}
	wantRes := &sdk.CNIAddResponse{IPs: []sdk.IPConfig{{Address: podIP, Gateway: netip.MustParseAddr("10.10.0.1")}},
		Routes: []sdk.Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), GW: netip.MustParseAddr("10.10.0.1")}}, Interface: wantPod, MTU: 1450}
	if diff := cmp.Diff(wantRes, res, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("CNI result over the wire (-want +got):\n%s", diff)
	}
	if err := p.CNIDel(ctx, sdk.CNIArgs{ContainerID: "gone"}); !errors.Is(err, sdk.ErrNotFound) || !strings.Contains(err.Error(), "container gone") {
		t.Errorf("CNIDel error lost its sentinel or text: %v", err)
	}
	if err := p.PodInterfaceEvent(ctx, sdk.PodInterfaceEventRequest{Kind: sdk.PodInterfaceAdded, Interface: wantPod}); err != nil {
		t.Errorf("PodInterfaceEvent: %v", err)
	}
	if err := p.NodeEvent(ctx, sdk.NodeEventRequest{Kind: sdk.NodeUpdated, Node: sdk.NodeInfo{Name: "n2",
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.2.0/24")}, NodeIPs: []netip.Addr{netip.MustParseAddr("192.0.2.2")}}}); err != nil {
		t.Errorf("NodeEvent: %v", err)
	}
	oldFacts := sdk.NodeFacts{Name: "node-1", MTU: 1500, PodMTU: 1450}
	newFacts := oldFacts
	newFacts.PodMTU, newFacts.Uplink, newFacts.ExternalIPs = 1400, "eth0", []netip.Addr{netip.MustParseAddr("203.0.113.9")}
	if err := p.NodeFactsChanged(ctx, sdk.NodeFactsChangedRequest{Old: oldFacts, New: newFacts}); err != nil {
		t.Errorf("NodeFactsChanged: %v", err)
	}
	if err := p.Ping(); err != nil {
		t.Errorf("Ping: %v", err)
	}
	// The plugin's slog line reached the host logger, tagged with its name.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "hello from plugin") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if l := logs.String(); !strings.Contains(l, `msg="hello from plugin"`) || !strings.Contains(l, "plugin=t") || !strings.Contains(l, `config="{\"x\":1}"`) {
		t.Errorf("plugin log line not in host log (waited 5s):\n%s", l)
	}
}

func TestMissingCapabilityIsUnimplemented(t *testing.T) {
	p, err := launch(t, sdk.APIVersion, nil, "SDK_TEST_FEATURE=bare")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, caps, err := p.Describe(ctx)
	if err != nil || len(caps) != 0 {
		t.Fatalf("Describe: caps %v, err %v", caps, err)
	}
	if _, err := p.CNIAdd(ctx, sdk.CNIArgs{ContainerID: "c"}); err == nil || !strings.Contains(err.Error(), `does not have the "cni" capability`) {
		t.Errorf("CNIAdd on a non-CNI plugin: err = %v", err)
	}
}

func TestUnsupportedVersionRefused(t *testing.T) {
	_, err := launch(t, 99, nil)
	if !errors.Is(err, sdkhost.ErrUnsupportedVersion) {
		t.Fatalf("err = %v, want ErrUnsupportedVersion", err)
	}
	for _, s := range []string{"Plugin version: 99", "supports API versions [1]"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
}

// Describe carries the plugin's config, and table order constraints come
// back.
func TestDescribeGetsConfig(t *testing.T) {
	p, err := launch(t, sdk.APIVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	desc, _, err := p.DescribeWith(ctx, sdk.DescribeRequest{Config: []byte(`{"second":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := []sdk.Table{
		{Name: "t.class", Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier, Miss: sdk.MissNext, Exported: true},
		{Name: "t.second", Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier, After: []string{"t.class"}},
	}
	if diff := cmp.Diff(want, desc.Tables); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
}

// A CNIError crosses the wire with its code, message and details, and
// still unwraps on the host side.
func TestCNIErrorCrossesTheWire(t *testing.T) {
	p, err := launch(t, sdk.APIVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, _, err := p.Describe(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx, sdkhost.StartArgs{Assignment: sdk.Assignment{Tables: map[string]uint8{"t.class": 0}, Fields: map[string]flow.Bits{"mark": {Reg: 2, Width: 8}}, CookiePrefix: 1, Round: 1},
		Service: &fakeHost{},
		Cluster: sdk.Cluster{APIServer: sdk.Endpoint{URL: "https://192.0.2.1:6443"}, Controller: sdk.Endpoint{URL: "192.0.2.1:10349", CAPEM: []byte("ca")}}}); err != nil {
		t.Fatal(err)
	}
	err = p.CNICheck(ctx, sdk.CNIArgs{ContainerID: "broken", IfName: "eth0"})
	var ce *sdk.CNIError
	if !errors.As(fmt.Errorf("wrapped by the host: %w", err), &ce) {
		t.Fatalf("CNICheck error %v (%T) carries no CNIError", err, err)
	}
	if diff := cmp.Diff(&sdk.CNIError{Code: 104, Msg: "veth gone", Details: "delete and re-add the pod"}, ce); diff != "" {
		t.Errorf("CNIError (-want +got):\n%s", diff)
	}
}

// The host refuses a description with a resource kind it does not know.
func TestDescribeUnknownResourceKind(t *testing.T) {
	p, err := launch(t, sdk.APIVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _, err = p.DescribeWith(ctx, sdk.DescribeRequest{Config: []byte(`{"badResource":true}`)})
	if want := `resource "t.odd": unknown kind 99`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want one containing %q", err, want)
	}
}

// TestRelabel pins LabelPort's merge rule, which the agent and the fake
// host share.
func TestRelabel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cur, set map[string]string
		want     map[string]string
	}{
		{"onto nothing", nil, map[string]string{"a": "1"}, map[string]string{"a": "1"}},
		{"keeps other keys", map[string]string{"o": "x"}, map[string]string{"a": "1"}, map[string]string{"o": "x", "a": "1"}},
		{"replaces a value", map[string]string{"a": "0"}, map[string]string{"a": "1"}, map[string]string{"a": "1"}},
		{"an empty value removes its key", map[string]string{"a": "0", "o": "x"}, map[string]string{"a": ""}, map[string]string{"o": "x"}},
		{"removing a missing key", nil, map[string]string{"a": ""}, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.cur)
			got := sdk.Relabel(tc.cur, tc.set)
			if !maps.Equal(got, tc.want) || got == nil {
				t.Errorf("Relabel(%v, %v) = %v, want %v", tc.cur, tc.set, got, tc.want)
			}
			if !maps.Equal(tc.cur, before) {
				t.Errorf("Relabel changed its input to %v", tc.cur)
			}
		})
	}
}
