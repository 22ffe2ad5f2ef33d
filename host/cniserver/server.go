package cniserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	"google.golang.org/grpc"

	"switchyard.dev/switchyard/cni/cnierr"
	"switchyard.dev/switchyard/cni/cnimux"
	"switchyard.dev/switchyard/cni/cnipb"
	"switchyard.dev/switchyard/cni/netconf"
	"switchyard.dev/switchyard/host/ifstore"
	"switchyard.dev/switchyard/sdk"
)

// Plugin is the host-side handle of the plugin process that holds the CNI
// capability (*sdkhost.Plugin): the server calls it directly, with no
// adapter in between.
type Plugin interface {
	CNIAdd(ctx context.Context, a sdk.CNIArgs) (*sdk.CNIAddResponse, error)
	CNIDel(ctx context.Context, a sdk.CNIArgs) error
	CNICheck(ctx context.Context, a sdk.CNIArgs) error
	// CNIGC removes what the plugin holds beyond the valid attachments
	// (0, nil from a plugin that does not collect garbage).
	CNIGC(ctx context.Context, valid []sdk.CNIAttachment, netConf []byte) (int, error)
}

// Resolver returns the plugin that currently holds the CNI capability, or
// false while none is ready (agent starting, plugin restarting).
type Resolver func() (Plugin, bool)

// Options configure a Server.
type Options struct {
	// Socket is the unix socket path; netconf.DefaultSocket when empty.
	Socket string
	// Handler finds the CNI-capable plugin for each request.
	Handler Resolver
	// WaitReady, if set, is called before each ADD: it waits (up to its own
	// bound) for the agent to be ready, and its error, naming what is not
	// ready, fails the ADD with "try again later" (CNI error 11).
	WaitReady func(ctx context.Context) error
	// Store records attached interfaces.
	Store *ifstore.Store
	// LockWait bounds how long a request waits for another request on the
	// same container (default 30s).
	LockWait time.Duration
	// CallTimeout bounds one call into the plugin (default 90s), and
	// RollbackTimeout the cleanup after a failed ADD (default 30s).
	CallTimeout     time.Duration
	RollbackTimeout time.Duration
	Logger          *slog.Logger
	// Observe, if set, is told of every request served: its verb (ADD,
	// DEL, CHECK, STATUS, GC), how long it took and whether it failed
	// (the agent's CNI latency metric).
	Observe func(verb string, took time.Duration, failed bool)
	// Begin, if set, is called as each ADD, DEL and CHECK is received, and
	// the function it returns when that request is answered: the agent
	// lets pod wiring go ahead of bulk flow work through it
	// (Agent.CNIBegin).
	Begin func() (end func())
}

// Server serves the CNI gRPC API.
type Server struct {
	cnipb.UnimplementedCNIServer
	o     Options
	log   *slog.Logger
	locks *keyedLocks

	mu   sync.Mutex
	grpc *grpc.Server
	// mux serves the thin binary's JSON calls and hands gRPC connections
	// to grpc, on the one socket.
	mux *cnimux.Mux
}

var _ cnipb.CNIServer = (*Server)(nil)

// New validates o and returns a Server; nothing is listening until Serve.
func New(o Options) (*Server, error) {
	if o.Handler == nil {
		return nil, errors.New("cniserver: Options.Handler is required")
	}
	if o.Store == nil {
		return nil, errors.New("cniserver: Options.Store is required")
	}
	if o.Socket == "" {
		o.Socket = netconf.DefaultSocket
	}
	if o.LockWait == 0 {
		o.LockWait = 30 * time.Second
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = 90 * time.Second
	}
	if o.RollbackTimeout == 0 {
		o.RollbackTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Server{o: o, log: o.Logger.With("component", "cniserver"), locks: newKeyedLocks()}, nil
}

// Listen binds the socket, replacing a stale one left by a previous agent.
// It is separate from Serve so a caller knows the socket exists before
// writing the conflist.
func (s *Server) Listen() error {
	if err := os.MkdirAll(filepath.Dir(s.o.Socket), 0o755); err != nil {
		return fmt.Errorf("cniserver: %w", err)
	}
	if err := os.Remove(s.o.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cniserver: removing stale socket: %w", err)
	}
	l, err := net.Listen("unix", s.o.Socket)
	if err != nil {
		return fmt.Errorf("cniserver: %w", err)
	}
	// Only root (the runtime) may drive pod networking.
	if err := os.Chmod(s.o.Socket, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("cniserver: %w", err)
	}
	var opts []grpc.ServerOption
	if s.o.Observe != nil {
		opts = append(opts, grpc.UnaryInterceptor(s.observe))
	}
	g := grpc.NewServer(opts...)
	cnipb.RegisterCNIServer(g, s)
	m := cnimux.New(l, s, cnimux.Options{Logger: s.log, Observe: s.o.Observe})
	s.mu.Lock()
	s.grpc, s.mux = g, m
	s.mu.Unlock()
	s.log.Info("CNI server listening", "socket", s.o.Socket)
	return nil
}

// Serve answers requests until Stop; it calls Listen if needed.
func (s *Server) Serve() error {
	s.mu.Lock()
	g, m := s.grpc, s.mux
	s.mu.Unlock()
	if g == nil {
		if err := s.Listen(); err != nil {
			return err
		}
		s.mu.Lock()
		g, m = s.grpc, s.mux
		s.mu.Unlock()
	}
	muxDone := make(chan error, 1)
	go func() { muxDone <- m.Serve() }()
	err := g.Serve(m.GRPC())
	// The gRPC server stopped (Stop closes both).
	m.Close()
	if merr := <-muxDone; err == nil || errors.Is(err, grpc.ErrServerStopped) {
		err = merr
	}
	return err
}

// Stop lets in-flight requests finish for up to grace, then cuts them off.
func (s *Server) Stop(grace time.Duration) {
	s.mu.Lock()
	g, m := s.grpc, s.mux
	s.mu.Unlock()
	if g == nil {
		return
	}
	// No new connection of either kind; calls in flight of both kinds get
	// grace to finish, then are cut off.
	m.Close()
	done := make(chan struct{})
	go func() { g.GracefulStop(); m.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		g.Stop()
		m.Cancel()
		<-done
	}
}

// request is a validated CmdRequest.
type request struct {
	args sdk.CNIArgs
	key  ifstore.Key
	conf *netconf.NetConf
	log  *slog.Logger
}

func (s *Server) validate(r *cnipb.CmdRequest, cmd string) (*request, *cnipb.Error) {
	if err := utils.ValidateContainerID(r.GetContainerId()); err != nil {
		return nil, perr(types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID: "+err.Msg, "the runtime must pass the sandbox's container ID")
	}
	if err := utils.ValidateInterfaceName(r.GetIfname()); err != nil {
		return nil, perr(types.ErrInvalidEnvironmentVariables, "CNI_IFNAME: "+err.Msg, "use a Linux interface name such as eth0")
	}
	conf, err := netconf.Parse(r.GetNetConf())
	if err != nil {
		return nil, perr(types.ErrInvalidNetworkConfig, err.Error(), "fix the switchyard conflist")
	}
	pod := r.GetPod()
	if cmd != "DEL" {
		if pod.GetNamespace() == "" || pod.GetName() == "" {
			return nil, perr(types.ErrInvalidEnvironmentVariables, "CNI_ARGS must carry K8S_POD_NAMESPACE and K8S_POD_NAME",
				"switchyard attaches Kubernetes pods only")
		}
		if r.GetNetns() == "" {
			return nil, perr(types.ErrInvalidNetNS, "CNI_NETNS is empty", "the runtime must pass the pod's network namespace path")
		}
		if _, err := os.Stat(r.GetNetns()); err != nil {
			return nil, perr(types.ErrInvalidNetNS, fmt.Sprintf("network namespace %s does not exist", r.GetNetns()),
				"the pod sandbox is gone or the runtime passed a wrong path; the runtime will create a new sandbox")
		}
	}
	req := &request{
		args: sdk.CNIArgs{
			ContainerID: r.GetContainerId(), Netns: r.GetNetns(), IfName: r.GetIfname(),
			PodNamespace: pod.GetNamespace(), PodName: pod.GetName(), PodUID: pod.GetUid(),
			NetConf: r.GetNetConf(), MTU: conf.MTU,
		},
		key:  ifstore.Key{ContainerID: r.GetContainerId(), IfName: r.GetIfname()},
		conf: conf,
	}
	req.log = s.log.With("cmd", cmd, "container", req.key.ContainerID, "ifname", req.key.IfName,
		"pod", pod.GetNamespace()+"/"+pod.GetName())
	return req, nil
}

// withLock runs fn holding the container's lock.
func (s *Server) withLock(ctx context.Context, req *request, fn func() *cnipb.Error) *cnipb.Error {
	lctx, cancel := context.WithTimeout(ctx, s.o.LockWait)
	defer cancel()
	unlock, err := s.locks.lock(lctx, req.key.ContainerID)
	if err != nil {
		req.log.Warn("gave up waiting for another CNI call on the same container", "waited", s.o.LockWait)
		return perr(types.ErrTryAgainLater,
			fmt.Sprintf("another CNI call for container %s is still running after %s", req.key.ContainerID, s.o.LockWait),
			"the runtime will retry once it finishes")
	}
	defer unlock()
	return fn()
}

func (s *Server) handler() (Plugin, *cnipb.Error) {
	h, ok := s.o.Handler()
	if !ok || h == nil {
		return nil, perr(types.ErrTryAgainLater, "switchyard agent is not ready: no plugin with the CNI capability (podnet) is running yet",
			"the agent is starting or restarting its pod network plugin; the runtime will retry (check the agent log if this persists)")
	}
	return h, nil
}

// Add attaches a pod.
func (s *Server) Add(ctx context.Context, r *cnipb.CmdRequest) (*cnipb.AddResponse, error) {
	defer s.begin()()
	req, verr := s.validate(r, "ADD")
	if verr != nil {
		s.log.Warn("rejected CNI ADD", "container", r.GetContainerId(), "error", verr.GetMsg())
		return &cnipb.AddResponse{Error: verr}, nil
	}
	if s.o.WaitReady != nil {
		if err := s.o.WaitReady(ctx); err != nil {
			req.log.Warn("CNI ADD before the agent is ready; the runtime will retry", "error", err)
			return &cnipb.AddResponse{Error: perr(types.ErrTryAgainLater, err.Error(),
				"the runtime retries; if this persists, GET /readyz on the agent (or its log) says what it waits for")}, nil
		}
	}
	var result *cnipb.Result
	e := s.withLock(ctx, req, func() *cnipb.Error {
		if old, ok := s.o.Store.Get(req.key); ok {
			return perr(cnierr.AlreadyAttached,
				fmt.Sprintf("container %s already has %s attached (pod %s, IPs %v)", req.key.ContainerID, req.key.IfName, old.Pod(), old.IPs),
				"CNI forbids a second ADD without a DEL in between; the existing attachment is left untouched")
		}
		h, herr := s.handler()
		if herr != nil {
			return herr
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
		defer cancel()
		resp, err := h.CNIAdd(cctx, req.args)
		if err != nil {
			req.log.Error("CNI ADD failed, rolling back", "error", err)
			s.rollback(h, req)
			return toProto(err)
		}
		res, rec, err := buildResult(req, resp)
		if err == nil {
			err = s.o.Store.Put(rec)
		}
		if err != nil {
			req.log.Error("CNI ADD result unusable, rolling back", "error", err)
			s.rollback(h, req)
			return toProto(err)
		}
		result = res
		req.log.Info("pod attached", "ips", rec.IPs, "port", rec.HostIfName, "ofport", rec.OFPort, "took", time.Since(start))
		return nil
	})
	if e != nil {
		return &cnipb.AddResponse{Error: e}, nil
	}
	return &cnipb.AddResponse{Result: result}, nil
}

// rollback undoes a failed ADD with a DEL of the same attachment, the one
// place an ADD is rolled back: the plugin does not undo its own partial
// work (sdk.CNIHandler), and its DEL removes whatever part exists.
func (s *Server) rollback(h Plugin, req *request) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.RollbackTimeout)
	defer cancel()
	if err := h.CNIDel(ctx, req.args); err != nil {
		req.log.Error("rollback after failed ADD failed; CNI DEL or GC will retry the cleanup", "error", err)
	}
}

func buildResult(req *request, resp *sdk.CNIAddResponse) (*cnipb.Result, ifstore.Interface, error) {
	pi := resp.Interface
	if len(resp.IPs) == 0 {
		return nil, ifstore.Interface{}, fmt.Errorf("plugin returned no IP for container %s", req.key.ContainerID)
	}
	if pi.HostIfName == "" {
		return nil, ifstore.Interface{}, fmt.Errorf("plugin returned no host interface name for container %s", req.key.ContainerID)
	}
	ifname := pi.IfName
	if ifname == "" {
		ifname = req.args.IfName
	}
	res := &cnipb.Result{
		Interfaces: []*cnipb.Interface{
			{Name: pi.HostIfName},
			{Name: ifname, Mac: pi.MAC.String(), Sandbox: req.args.Netns, Mtu: uint32(resp.MTU)},
		},
	}
	var ips []netip.Addr
	for _, ip := range resp.IPs {
		c := &cnipb.IPConfig{Interface: ptr(int32(1)), Address: ip.Address.String()}
		if ip.Gateway.IsValid() {
			c.Gateway = ip.Gateway.String()
		}
		res.Ips = append(res.Ips, c)
		ips = append(ips, ip.Address.Addr())
	}
	for _, rt := range resp.Routes {
		r := &cnipb.Route{Dst: rt.Dst.String()}
		if rt.GW.IsValid() {
			r.Gw = rt.GW.String()
		}
		res.Routes = append(res.Routes, r)
	}
	rec := ifstore.Interface{
		PodNamespace: req.args.PodNamespace, PodName: req.args.PodName, PodUID: req.args.PodUID,
		ContainerID: req.key.ContainerID, IfName: ifname, HostIfName: pi.HostIfName,
		Netns: req.args.Netns, OFPort: pi.OFPort, MAC: pi.MAC.String(), IPs: ips,
	}
	return res, rec, nil
}

func ptr[T any](v T) *T { return &v }

// Del detaches a pod. Unknown containers and vanished namespaces succeed.
func (s *Server) Del(ctx context.Context, r *cnipb.CmdRequest) (*cnipb.CmdResponse, error) {
	defer s.begin()()
	req, verr := s.validate(r, "DEL")
	if verr != nil {
		return &cnipb.CmdResponse{Error: verr}, nil
	}
	return &cnipb.CmdResponse{Error: s.withLock(ctx, req, func() *cnipb.Error { return s.del(ctx, req) })}, nil
}

// del runs with the container's lock held.
func (s *Server) del(ctx context.Context, req *request) *cnipb.Error {
	rec, known := s.o.Store.Get(req.key)
	h, ok := s.o.Handler()
	if !ok || h == nil {
		if !known {
			// Nothing was ever attached through this agent: nothing to undo.
			req.log.Info("DEL of an unknown container while no CNI plugin runs; nothing to do")
			return nil
		}
		_, herr := s.handler()
		return herr
	}
	args := req.args
	if args.Netns == "" && known {
		args.Netns = rec.Netns
	}
	if known && args.PodNamespace == "" {
		args.PodNamespace, args.PodName, args.PodUID = rec.PodNamespace, rec.PodName, rec.PodUID
	}
	cctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
	defer cancel()
	if err := h.CNIDel(cctx, args); err != nil {
		req.log.Error("CNI DEL failed", "error", err)
		return toProto(err)
	}
	if _, _, err := s.o.Store.Delete(req.key); err != nil {
		return toProto(err)
	}
	req.log.Info("pod detached", "was_known", known)
	return nil
}

// Check verifies an attachment.
func (s *Server) Check(ctx context.Context, r *cnipb.CmdRequest) (*cnipb.CmdResponse, error) {
	defer s.begin()()
	req, verr := s.validate(r, "CHECK")
	if verr != nil {
		return &cnipb.CmdResponse{Error: verr}, nil
	}
	return &cnipb.CmdResponse{Error: s.withLock(ctx, req, func() *cnipb.Error {
		if _, ok := s.o.Store.Get(req.key); !ok {
			return perr(types.ErrUnknownContainer, fmt.Sprintf("container %s has no %s attached by switchyard", req.key.ContainerID, req.key.IfName),
				"the agent has no record of this attachment; the runtime should DEL and ADD the sandbox again")
		}
		h, herr := s.handler()
		if herr != nil {
			return herr
		}
		cctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
		defer cancel()
		if err := h.CNICheck(cctx, req.args); err != nil {
			req.log.Warn("CNI CHECK failed", "error", err)
			return toProto(err)
		}
		return nil
	})}, nil
}

// Status reports whether ADDs can be served.
func (s *Server) Status(ctx context.Context, r *cnipb.StatusRequest) (*cnipb.CmdResponse, error) {
	if _, err := netconf.Parse(r.GetNetConf()); err != nil {
		return &cnipb.CmdResponse{Error: perr(types.ErrInvalidNetworkConfig, err.Error(), "fix the switchyard conflist")}, nil
	}
	if _, herr := s.handler(); herr != nil {
		herr.Code = uint32(types.ErrPluginNotAvailable)
		return &cnipb.CmdResponse{Error: herr}, nil
	}
	return &cnipb.CmdResponse{}, nil
}

// GC detaches every recorded interface the runtime no longer lists, then
// has the CNI plugin remove what it holds beyond the list: attachments the
// host never recorded (an ADD cut short by an agent crash).
func (s *Server) GC(ctx context.Context, r *cnipb.GCRequest) (*cnipb.CmdResponse, error) {
	if _, err := netconf.Parse(r.GetNetConf()); err != nil {
		return &cnipb.CmdResponse{Error: perr(types.ErrInvalidNetworkConfig, err.Error(), "fix the switchyard conflist")}, nil
	}
	valid := map[ifstore.Key]bool{}
	var validList []sdk.CNIAttachment
	for _, a := range r.GetValidAttachments() {
		valid[ifstore.Key{ContainerID: a.GetContainerId(), IfName: a.GetIfname()}] = true
		validList = append(validList, sdk.CNIAttachment{ContainerID: a.GetContainerId(), IfName: a.GetIfname()})
	}
	var failed []string
	for _, rec := range s.o.Store.List() {
		if valid[rec.Key()] {
			continue
		}
		req := &request{
			args: sdk.CNIArgs{ContainerID: rec.ContainerID, Netns: rec.Netns, IfName: rec.IfName,
				PodNamespace: rec.PodNamespace, PodName: rec.PodName, PodUID: rec.PodUID, NetConf: r.GetNetConf()},
			key: rec.Key(),
			log: s.log.With("cmd", "GC", "container", rec.ContainerID, "ifname", rec.IfName, "pod", rec.Pod()),
		}
		if e := s.withLock(ctx, req, func() *cnipb.Error { return s.del(ctx, req) }); e != nil {
			failed = append(failed, rec.Key().String()+": "+e.GetMsg())
		}
	}
	if h, herr := s.handler(); herr == nil {
		cctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
		n, err := h.CNIGC(cctx, validList, r.GetNetConf())
		cancel()
		switch {
		case err != nil:
			failed = append(failed, "the CNI plugin's own garbage: "+err.Error())
		case n > 0:
			s.log.Warn("CNI GC: the CNI plugin removed attachments the agent had no record of", "removed", n)
		}
	} else {
		failed = append(failed, "the CNI plugin's own garbage: "+herr.GetMsg())
	}
	if len(failed) > 0 {
		return &cnipb.CmdResponse{Error: perr(types.ErrInternal, "GC could not release "+strings.Join(failed, "; "),
			"the next GC retries them")}, nil
	}
	return &cnipb.CmdResponse{}, nil
}

// begin marks a pod request in flight for Options.Begin; calling what it
// returns ends it.
func (s *Server) begin() (end func()) {
	if s.o.Begin == nil {
		return func() {}
	}
	return s.o.Begin()
}

// observe times one request for Options.Observe. A CNI error travels in
// the response (its Error field), not as a gRPC error; either counts as a
// failure.
func (s *Server) observe(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	failed := err != nil
	if r, ok := resp.(interface{ GetError() *cnipb.Error }); ok && r.GetError() != nil {
		failed = true
	}
	verb := strings.ToUpper(info.FullMethod[strings.LastIndexByte(info.FullMethod, '/')+1:])
	s.o.Observe(verb, time.Since(start), failed)
	return resp, err
}
