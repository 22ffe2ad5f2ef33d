package cnimux

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"switchyard.dev/switchyard/cni/cnipb"
	"switchyard.dev/switchyard/cni/cniwire"
)

// handler answers ADD with one address and DEL only when its caller's
// context ends, reporting that on ended.
type handler struct {
	cnipb.UnimplementedCNIServer
	ended chan error
}

func (h *handler) Add(ctx context.Context, r *cnipb.CmdRequest) (*cnipb.AddResponse, error) {
	return &cnipb.AddResponse{Result: &cnipb.Result{Ips: []*cnipb.IPConfig{{Address: "10.0.0.5/24", Gateway: "10.0.0.1"}}}}, nil
}

func (h *handler) Del(ctx context.Context, r *cnipb.CmdRequest) (*cnipb.CmdResponse, error) {
	<-ctx.Done()
	h.ended <- ctx.Err()
	return &cnipb.CmdResponse{}, nil
}

func start(t *testing.T, h *handler) (string, *Mux) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cni.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	m := New(l, h, Options{})
	g := grpc.NewServer()
	cnipb.RegisterCNIServer(g, h)
	go g.Serve(m.GRPC())
	done := make(chan struct{})
	go func() { m.Serve(); close(done) }()
	t.Cleanup(func() { m.Close(); m.Cancel(); g.Stop(); <-done; m.Wait() })
	return sock, m
}

// One socket answers the thin binary's JSON and gRPC clients alike.
func TestBothProtocolsOnOneSocket(t *testing.T) {
	sock, _ := start(t, &handler{ended: make(chan error, 1)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	resp, err := cniwire.Call(ctx, sock, &cniwire.Request{Op: cniwire.OpAdd, ContainerID: "c1"})
	if err != nil {
		t.Fatalf("JSON ADD: %v", err)
	}
	if resp.Error != nil || resp.Result == nil || resp.Result.IPs[0].Address != "10.0.0.5/24" || resp.Result.IPs[0].Gateway != "10.0.0.1" {
		t.Errorf("JSON ADD answered %+v", resp)
	}

	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	gr, err := cnipb.NewCNIClient(cc).Add(ctx, &cnipb.CmdRequest{ContainerId: "c1"})
	if err != nil || gr.GetResult().GetIps()[0].GetAddress() != "10.0.0.5/24" {
		t.Errorf("gRPC ADD: %v, %v", gr, err)
	}

	// What the handler does not implement is named, as a CNI error.
	resp, err = cniwire.Call(ctx, sock, &cniwire.Request{Op: cniwire.OpCheck})
	if err != nil || resp.Error == nil || resp.Error.Code != types.ErrIncompatibleCNIVersion {
		t.Errorf("JSON CHECK of a handler without it: %+v, %v; want code %d", resp, err, types.ErrIncompatibleCNIVersion)
	}
}

// A caller that hangs up (the binary killed, or past its timeout) ends
// the call's context, as gRPC does.
func TestHangUpCancelsTheCall(t *testing.T) {
	h := &handler{ended: make(chan error, 1)}
	sock, _ := start(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := cniwire.Call(ctx, sock, &cniwire.Request{Op: cniwire.OpDel, ContainerID: "c1"}); err == nil {
		t.Fatal("a DEL that never returns answered")
	}
	select {
	case err := <-h.ended:
		if err != context.Canceled {
			t.Errorf("the handler's context ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context did not end within 10s of the caller hanging up")
	}
}

// Cancel ends calls still running when the agent stops.
func TestCancelEndsCallsInFlight(t *testing.T) {
	h := &handler{ended: make(chan error, 1)}
	sock, m := start(t, h)
	errc := make(chan error, 1)
	go func() {
		_, err := cniwire.Call(context.Background(), sock, &cniwire.Request{Op: cniwire.OpDel, ContainerID: "c1"})
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	m.Close()
	m.Cancel()
	select {
	case <-h.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("Cancel did not end the call in flight")
	}
	m.Wait()
	<-errc
}

func TestMalformedRequestIsAnswered(t *testing.T) {
	sock, _ := start(t, &handler{ended: make(chan error, 1)})
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(`{"op":"VERSION"}`))
	resp := &cniwire.Response{}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := jsonDecode(c, resp); err != nil {
		t.Fatal(err)
	}
	if resp.Error == nil || resp.Error.Code != types.ErrDecodingFailure {
		t.Errorf("answer to an unknown op: %+v, want code %d", resp.Error, types.ErrDecodingFailure)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func jsonDecode(c net.Conn, v any) error { return json.NewDecoder(c).Decode(v) }
