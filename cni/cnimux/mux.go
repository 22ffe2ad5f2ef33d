package cnimux

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"switchyard.dev/switchyard/cni/cnipb"
	"switchyard.dev/switchyard/cni/cniwire"
)

// sniffTimeout bounds how long a new connection may stay silent before its
// first byte says which protocol it speaks.
const sniffTimeout = 10 * time.Second

// Mux splits one listener between a gRPC server (GRPC) and the JSON
// callers, which it serves itself.
type Mux struct {
	l       net.Listener
	h       cnipb.CNIServer
	log     *slog.Logger
	observe func(verb string, took time.Duration, failed bool)
	grpc    *chanListener
	// calls are the JSON calls in flight; base ends them all (Cancel).
	calls  sync.WaitGroup
	base   context.Context
	cancel context.CancelFunc
}

// Options configure a Mux.
type Options struct {
	Logger *slog.Logger
	// Observe, if set, is told of every JSON call: verb, duration and
	// whether it failed (gRPC calls are timed by the gRPC server's own
	// interceptor).
	Observe func(verb string, took time.Duration, failed bool)
}

// New returns a Mux over l serving JSON calls with h. Call Serve to accept,
// and pass GRPC() to the gRPC server's Serve.
func New(l net.Listener, h cnipb.CNIServer, o Options) *Mux {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	base, cancel := context.WithCancel(context.Background())
	return &Mux{l: l, h: h, log: o.Logger, observe: o.Observe, base: base, cancel: cancel,
		grpc: &chanListener{addr: l.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}}
}

// GRPC is the listener of the gRPC connections.
func (m *Mux) GRPC() net.Listener { return m.grpc }

// Serve accepts until the listener is closed (Close). JSON calls in flight
// go on: Wait waits for them, Cancel ends them.
func (m *Mux) Serve() error {
	for {
		c, err := m.l.Accept()
		if err != nil {
			m.grpc.Close()
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		m.calls.Add(1)
		go func() {
			defer m.calls.Done()
			m.route(c)
		}()
	}
}

// Close stops accepting.
func (m *Mux) Close() error {
	err := m.l.Close()
	m.grpc.Close()
	return err
}

// Wait waits for the JSON calls in flight (and connections not yet
// routed).
func (m *Mux) Wait() { m.calls.Wait() }

// Cancel ends the JSON calls in flight: their contexts are cancelled.
func (m *Mux) Cancel() { m.cancel() }

// route reads the first byte: '{' opens a JSON request, anything else
// (gRPC's HTTP/2 preface starts with "PRI") goes to the gRPC server.
func (m *Mux) route(c net.Conn) {
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(sniffTimeout))
	first, err := br.Peek(1)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	conn := &peekedConn{Conn: c, r: br}
	if first[0] != '{' {
		if !m.grpc.hand(conn) {
			c.Close()
		}
		return
	}
	m.serveJSON(conn)
}

// serveJSON answers one JSON request. The call's context ends when the
// caller hangs up (the binary was killed or gave up), as a gRPC call's
// would.
func (m *Mux) serveJSON(c *peekedConn) {
	defer c.Close()
	req, err := cniwire.ReadRequest(c)
	if err != nil {
		m.log.Warn("refused a malformed CNI request", "error", err)
		cniwire.WriteResponse(c, &cniwire.Response{Error: &cniwire.Error{Code: types.ErrDecodingFailure, Msg: err.Error(),
			Details: "the switchyard-cni binary and the agent may be from different releases; reinstall the binary from the running agent image"}})
		return
	}
	ctx, cancel := context.WithCancel(m.base)
	defer cancel()
	go func() {
		// Nothing more is sent; a read ends when the caller closes.
		io.Copy(io.Discard, c)
		cancel()
	}()
	start := time.Now()
	resp := m.dispatch(ctx, req)
	if m.observe != nil {
		m.observe(req.Op, time.Since(start), resp.Error != nil)
	}
	if err := cniwire.WriteResponse(c, resp); err != nil {
		m.log.Warn("could not answer a CNI call; the caller is gone", "op", req.Op, "container", req.ContainerID, "error", err)
	}
}

func (m *Mux) dispatch(ctx context.Context, r *cniwire.Request) *cniwire.Response {
	cmd := &cnipb.CmdRequest{ContainerId: r.ContainerID, Netns: r.Netns, Ifname: r.IfName, CniVersion: r.CNIVersion,
		NetworkName: r.NetworkName, Pod: &cnipb.PodRef{Namespace: r.Pod.Namespace, Name: r.Pod.Name, Uid: r.Pod.UID},
		RawArgs: r.RawArgs, NetConf: r.NetConf}
	var (
		perr *cnipb.Error
		res  *cnipb.Result
		err  error
	)
	switch r.Op {
	case cniwire.OpAdd:
		var resp *cnipb.AddResponse
		resp, err = m.h.Add(ctx, cmd)
		perr, res = resp.GetError(), resp.GetResult()
	case cniwire.OpDel:
		var resp *cnipb.CmdResponse
		resp, err = m.h.Del(ctx, cmd)
		perr = resp.GetError()
	case cniwire.OpCheck:
		var resp *cnipb.CmdResponse
		resp, err = m.h.Check(ctx, cmd)
		perr = resp.GetError()
	case cniwire.OpStatus:
		var resp *cnipb.CmdResponse
		resp, err = m.h.Status(ctx, &cnipb.StatusRequest{CniVersion: r.CNIVersion, NetConf: r.NetConf})
		perr = resp.GetError()
	case cniwire.OpGC:
		gc := &cnipb.GCRequest{CniVersion: r.CNIVersion, NetConf: r.NetConf}
		for _, a := range r.ValidAttachments {
			gc.ValidAttachments = append(gc.ValidAttachments, &cnipb.Attachment{ContainerId: a.ContainerID, Ifname: a.IfName})
		}
		var resp *cnipb.CmdResponse
		resp, err = m.h.GC(ctx, gc)
		perr = resp.GetError()
	}
	switch {
	case err != nil:
		return &cniwire.Response{Error: handlerError(r.Op, err)}
	case perr != nil:
		return &cniwire.Response{Error: &cniwire.Error{Code: uint(perr.GetCode()), Msg: perr.GetMsg(), Details: perr.GetDetails()}}
	case res != nil:
		return &cniwire.Response{Result: Result(res)}
	}
	return &cniwire.Response{}
}

// handlerError turns an error the handler returned instead of a CNI error
// (an unimplemented call, a cancelled one) into one.
func handlerError(op string, err error) *cniwire.Error {
	switch status.Code(err) {
	case codes.Unimplemented:
		return &cniwire.Error{Code: types.ErrIncompatibleCNIVersion, Msg: fmt.Sprintf("the switchyard agent does not implement %s", op),
			Details: "the switchyard-cni binary and the agent are from different releases; reinstall the binary from the running agent image"}
	case codes.Canceled:
		return &cniwire.Error{Code: types.ErrTryAgainLater, Msg: fmt.Sprintf("%s was cancelled before the agent answered", op), Details: err.Error()}
	}
	return &cniwire.Error{Code: types.ErrInternal, Msg: fmt.Sprintf("the switchyard agent failed %s", op), Details: err.Error()}
}

// Result converts an ADD's result to the wire's.
func Result(r *cnipb.Result) *cniwire.Result {
	out := &cniwire.Result{}
	for _, in := range r.GetInterfaces() {
		out.Interfaces = append(out.Interfaces, cniwire.Interface{Name: in.GetName(), MAC: in.GetMac(), Sandbox: in.GetSandbox(), MTU: in.GetMtu()})
	}
	for _, ip := range r.GetIps() {
		out.IPs = append(out.IPs, cniwire.IPConfig{Interface: ip.Interface, Address: ip.GetAddress(), Gateway: ip.GetGateway()})
	}
	for _, rt := range r.GetRoutes() {
		out.Routes = append(out.Routes, cniwire.Route{Dst: rt.GetDst(), GW: rt.GetGw()})
	}
	if d := r.GetDns(); d != nil {
		out.DNS = &cniwire.DNS{Nameservers: d.GetNameservers(), Domain: d.GetDomain(), Search: d.GetSearch(), Options: d.GetOptions()}
	}
	return out
}

// peekedConn reads through the reader that peeked at its first byte.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener hands the gRPC server the connections route gave it.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *chanListener) hand(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
