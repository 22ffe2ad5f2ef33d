package thin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"switchyard.dev/switchyard/cni/cnierr"
	"switchyard.dev/switchyard/cni/cnimux"
	"switchyard.dev/switchyard/cni/cnipb"
)

// agent is the test's side of the gRPC seam: it answers every call with
// whatever the test case programs.
type agent struct {
	cnipb.UnimplementedCNIServer
	add     func(*cnipb.CmdRequest) (*cnipb.AddResponse, error)
	status  *cnipb.Error
	lastReq *cnipb.CmdRequest
	// block makes Add wait until the caller gives up.
	block bool
}

func (a *agent) Add(ctx context.Context, r *cnipb.CmdRequest) (*cnipb.AddResponse, error) {
	a.lastReq = r
	if a.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return a.add(r)
}

func (a *agent) Del(ctx context.Context, r *cnipb.CmdRequest) (*cnipb.CmdResponse, error) {
	a.lastReq = r
	return &cnipb.CmdResponse{}, nil
}

func (a *agent) Status(ctx context.Context, r *cnipb.StatusRequest) (*cnipb.CmdResponse, error) {
	return &cnipb.CmdResponse{Error: a.status}, nil
}

// serve answers on a unix socket in a temp dir as the agent does: the
// binary's JSON calls through cnimux, gRPC beside them.
func serve(t *testing.T, a *agent) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cni.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	m := cnimux.New(l, a, cnimux.Options{})
	s := grpc.NewServer()
	cnipb.RegisterCNIServer(s, a)
	go s.Serve(m.GRPC())
	done := make(chan struct{})
	go func() { m.Serve(); close(done) }()
	t.Cleanup(func() { m.Close(); s.Stop(); <-done })
	return sock
}

func conf(version, sock string, extra string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":%q,"name":"sy","type":"switchyard-cni","socket":%q%s}`, version, sock, extra))
}

func okResult(*cnipb.CmdRequest) (*cnipb.AddResponse, error) {
	return &cnipb.AddResponse{Result: &cnipb.Result{
		Interfaces: []*cnipb.Interface{
			{Name: "sy1234abcd", Mac: "0a:58:0a:f4:01:05"},
			{Name: "eth0", Mac: "0a:58:0a:f4:01:05", Sandbox: "/var/run/netns/p1", Mtu: 1450},
		},
		Ips: []*cnipb.IPConfig{
			{Interface: ptr(int32(1)), Address: "10.244.1.5/24", Gateway: "10.244.1.1"},
			{Interface: ptr(int32(1)), Address: "fd00:10:244:1::5/64", Gateway: "fd00:10:244:1::1"},
		},
		Routes: []*cnipb.Route{{Dst: "0.0.0.0/0", Gw: "10.244.1.1"}, {Dst: "::/0", Gw: "fd00:10:244:1::1"}},
	}}, nil
}

func ptr[T any](v T) *T { return &v }

func args(stdin []byte) *skel.CmdArgs {
	return &skel.CmdArgs{
		ContainerID: "c0ffee", Netns: "/var/run/netns/p1", IfName: "eth0",
		Args:      "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_UID=u1",
		StdinData: stdin,
	}
}

func TestAddConvertsToRequestedVersion(t *testing.T) {
	a := &agent{add: okResult}
	sock := serve(t, a)
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			var out bytes.Buffer
			p := &Plugin{stdout: &out, send: callUnix}
			if err := p.Add(args(conf(v, sock, ""))); err != nil {
				t.Fatalf("Add: %v", err)
			}
			var raw struct {
				CNIVersion string `json:"cniVersion"`
			}
			if err := json.Unmarshal(out.Bytes(), &raw); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out.String())
			}
			if raw.CNIVersion != v {
				t.Errorf("result cniVersion = %q, want %q", raw.CNIVersion, v)
			}
			res, err := version.NewResult(v, out.Bytes())
			if err != nil {
				t.Fatalf("runtime cannot parse result: %v\n%s", err, out.String())
			}
			cur, err := res.GetAsVersion("1.1.0")
			if err != nil {
				t.Fatal(err)
			}
			// Round-trip back to the newest version: nothing the old versions
			// can carry may be lost.
			var got, want bytes.Buffer
			if err := cur.PrintTo(&got); err != nil {
				t.Fatal(err)
			}
			full, _ := okResult(nil)
			if strings.HasPrefix(v, "0.") {
				// Interface MTU arrived in 1.0.0; older results cannot carry it.
				for _, in := range full.Result.Interfaces {
					in.Mtu = 0
				}
			}
			r, err := convert(cnimux.Result(full.Result), "1.1.0")
			if err != nil {
				t.Fatal(err)
			}
			if err := r.PrintTo(&want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.String(), got.String()); diff != "" {
				t.Errorf("result after %s round trip differs (-want +got):\n%s", v, diff)
			}
		})
	}
	if diff := cmp.Diff(&cnipb.PodRef{Namespace: "default", Name: "web-0", Uid: "u1"}, a.lastReq.GetPod(), cmpProto); diff != "" {
		t.Errorf("pod ref sent to agent (-want +got):\n%s", diff)
	}
}

var cmpProto = cmp.Comparer(func(a, b *cnipb.PodRef) bool {
	return a.GetNamespace() == b.GetNamespace() && a.GetName() == b.GetName() && a.GetUid() == b.GetUid()
})

func TestErrorMapping(t *testing.T) {
	slow := &agent{block: true}
	slowSock := serve(t, slow)
	exhausted := &agent{add: func(*cnipb.CmdRequest) (*cnipb.AddResponse, error) {
		return &cnipb.AddResponse{Error: &cnipb.Error{Code: uint32(cnierr.IPAMExhausted), Msg: "pod CIDR 10.244.1.0/30 is exhausted", Details: "free pods"}}, nil
	}}
	exSock := serve(t, exhausted)
	notReady := &agent{add: func(*cnipb.CmdRequest) (*cnipb.AddResponse, error) {
		return &cnipb.AddResponse{Error: &cnipb.Error{Code: uint32(types.ErrTryAgainLater), Msg: "agent not ready"}}, nil
	}, status: &cnipb.Error{Code: uint32(types.ErrTryAgainLater), Msg: "agent not ready"}}
	nrSock := serve(t, notReady)
	unimpl := &agent{add: func(*cnipb.CmdRequest) (*cnipb.AddResponse, error) {
		return nil, status.Error(codes.Unimplemented, "no")
	}}
	unSock := serve(t, unimpl)
	broken := &agent{add: func(*cnipb.CmdRequest) (*cnipb.AddResponse, error) {
		return &cnipb.AddResponse{Result: &cnipb.Result{Ips: []*cnipb.IPConfig{{Address: "banana"}}}}, nil
	}}
	brSock := serve(t, broken)

	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.sock")
	// A socket file nobody listens on: what a crashed agent leaves behind.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	tests := []struct {
		name     string
		cmd      func(*Plugin, *skel.CmdArgs) error
		args     *skel.CmdArgs
		wantCode uint
		wantMsg  string
	}{
		{"no socket", (*Plugin).Add, args(conf("1.0.0", missing, "")), types.ErrTryAgainLater, "agent is not running"},
		{"stale socket", (*Plugin).Add, args(conf("1.0.0", stale, "")), types.ErrTryAgainLater, "agent is not running"},
		{"timeout", (*Plugin).Add, args(conf("1.0.0", slowSock, `,"timeoutSeconds":1`)), types.ErrTryAgainLater, "did not answer ADD within 1s"},
		{"agent error kept", (*Plugin).Add, args(conf("1.0.0", exSock, "")), cnierr.IPAMExhausted, "exhausted"},
		{"agent not ready", (*Plugin).Add, args(conf("1.0.0", nrSock, "")), types.ErrTryAgainLater, "not ready"},
		{"status not ready", (*Plugin).Status, args(conf("1.1.0", nrSock, "")), types.ErrPluginNotAvailable, "not ready"},
		{"status not running", (*Plugin).Status, args(conf("1.1.0", missing, "")), types.ErrPluginNotAvailable, "not running"},
		{"version skew", (*Plugin).Add, args(conf("1.0.0", unSock, "")), types.ErrIncompatibleCNIVersion, "does not implement ADD"},
		{"garbled result", (*Plugin).Add, args(conf("1.0.0", brSock, "")), types.ErrInternal, "unusable result"},
		{"malformed json", (*Plugin).Add, args([]byte(`{"cniVersion":`)), types.ErrInvalidNetworkConfig, "not valid JSON"},
		{"bad mtu", (*Plugin).Add, args(conf("1.0.0", exSock, `,"mtu":12`)), types.ErrInvalidNetworkConfig, "\"mtu\" 12"},
		{"missing pod args", (*Plugin).Add, func() *skel.CmdArgs { a := args(conf("1.0.0", exSock, "")); a.Args = ""; return a }(),
			types.ErrInvalidEnvironmentVariables, "K8S_POD_NAMESPACE and K8S_POD_NAME"},
		{"garbled CNI_ARGS", (*Plugin).Add, func() *skel.CmdArgs { a := args(conf("1.0.0", exSock, "")); a.Args = "junk"; return a }(),
			types.ErrInvalidEnvironmentVariables, "cannot be parsed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plugin{stdout: &bytes.Buffer{}, send: callUnix}
			err := tc.cmd(p, tc.args)
			var e *types.Error
			if !errors.As(err, &e) {
				t.Fatalf("got %T %v, want *types.Error", err, err)
			}
			if e.Code != tc.wantCode {
				t.Errorf("code = %d, want %d (%v)", e.Code, tc.wantCode, e)
			}
			if !strings.Contains(e.Msg, tc.wantMsg) {
				t.Errorf("msg = %q, want it to contain %q", e.Msg, tc.wantMsg)
			}
		})
	}
}

// DEL must reach the agent even without pod args: a runtime cleaning up
// after a crash may not have them.
func TestDelWithoutPodArgs(t *testing.T) {
	a := &agent{}
	sock := serve(t, a)
	in := args(conf("0.3.1", sock, ""))
	in.Args = ""
	in.Netns = ""
	p := &Plugin{stdout: &bytes.Buffer{}, send: callUnix}
	if err := p.Del(in); err != nil {
		t.Fatalf("Del: %v", err)
	}
	if a.lastReq.GetContainerId() != "c0ffee" {
		t.Errorf("agent saw container %q, want c0ffee", a.lastReq.GetContainerId())
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
