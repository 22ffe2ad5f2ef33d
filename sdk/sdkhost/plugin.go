package sdkhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/internal/wire"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

// SupportedVersions are the plugin API versions this host speaks.
var SupportedVersions = []int{sdk.APIVersion}

// ErrUnsupportedVersion is returned by Launch for a plugin built against an
// API version this host does not speak.
var ErrUnsupportedVersion = errors.New("unsupported plugin API version")

// Config says how to launch one plugin.
type Config struct {
	// Name is the plugin's name in the host config; it tags the plugin's logs.
	Name string
	Path string
	Args []string
	// Env is added to the host's environment for the plugin.
	Env []string
	// Logger receives the plugin's own log lines (tagged plugin=Name).
	Logger *slog.Logger
	// StartTimeout bounds the handshake (default 10s).
	StartTimeout time.Duration
}

// Plugin is a running plugin process.
type Plugin struct {
	name    string
	client  *plugin.Client
	rpc     plugin.ClientProtocol
	wc      *wire.Client
	version int

	mu     sync.Mutex
	server *grpc.Server
}

// Launch starts the plugin process and completes the handshake.
func Launch(cfg Config) (*Plugin, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Env = append(cmd.Environ(), cfg.Env...)
	hostPlugin := &wire.FeaturePlugin{}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: wire.PluginSets(hostPlugin, SupportedVersions...),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           newHCLogger(cfg.Logger.With("plugin", cfg.Name)),
		StartTimeout:     cfg.StartTimeout,
		GRPCDialOptions:  wire.DialOptions(),
	})
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		if strings.Contains(err.Error(), "incompatible API version") {
			return nil, fmt.Errorf("plugin %q (%s): %w: %v; this host supports API versions %v, rebuild the plugin against a matching switchyard sdk",
				cfg.Name, cfg.Path, ErrUnsupportedVersion, err, SupportedVersions)
		}
		return nil, fmt.Errorf("plugin %q (%s): start: %w", cfg.Name, cfg.Path, err)
	}
	raw, err := rpc.Dispense(wire.PluginName)
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("plugin %q: dispense: %w", cfg.Name, err)
	}
	return &Plugin{name: cfg.Name, client: client, rpc: rpc, wc: raw.(*wire.Client), version: client.NegotiatedVersion()}, nil
}

// Attach wraps a plugin served in this process over a real gRPC connection
// (see sdk/sdktest); its arguments are internal to the SDK module.
func Attach(name string, rpc plugin.ClientProtocol, wc *wire.Client) *Plugin {
	return &Plugin{name: name, rpc: rpc, wc: wc, version: sdk.APIVersion}
}

// Version is the negotiated API version.
func (p *Plugin) Version() int { return p.version }

// Pid is the plugin's process ID (0 if unknown).
func (p *Plugin) Pid() int {
	if p.client == nil {
		return 0
	}
	if rc := p.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// Ping checks the plugin answers (gRPC health service).
func (p *Plugin) Ping() error { return p.rpc.Ping() }

// Exited reports whether the process has exited.
func (p *Plugin) Exited() bool { return p.client != nil && p.client.Exited() }

// Kill stops the process (graceful first, then forced) and the host service.
func (p *Plugin) Kill() {
	if p.client != nil {
		p.client.Kill()
	}
	p.mu.Lock()
	if p.server != nil {
		p.server.Stop()
		p.server = nil
	}
	p.mu.Unlock()
}

func fromStatus(err error) error {
	if code, msg, details, ok := wire.CNIFromStatus(err); ok {
		return &sdk.CNIError{Code: code, Msg: msg, Details: details}
	}
	return wire.FromStatus(err, sdk.Sentinels())
}

// Describe asks the plugin what it is and needs.
func (p *Plugin) Describe(ctx context.Context) (*sdk.DescribeResponse, []sdk.Capability, error) {
	return p.DescribeWith(ctx, sdk.DescribeRequest{})
}

// DescribeWith is Describe with the request's details (the plugin's
// config).
func (p *Plugin) DescribeWith(ctx context.Context, req sdk.DescribeRequest) (*sdk.DescribeResponse, []sdk.Capability, error) {
	r, err := p.wc.Feature.Describe(ctx, &pb.DescribeRequest{Config: req.Config})
	if err != nil {
		return nil, nil, fromStatus(err)
	}
	return fromPBDescribeResponse(r)
}

// StartArgs is what the host hands a plugin at start.
type StartArgs struct {
	Assignment sdk.Assignment
	Node       sdk.NodeFacts
	Config     []byte
	Service    HostService
	// Cluster says where the apiserver and controller are; the token comes
	// from Service.Token.
	Cluster sdk.Cluster
	// Attachments are the host's records of the pods attached through the
	// plugin (sdk.StartRequest.Attachments); for CNI plugins only.
	Attachments []sdk.PodInterface
}

// Start serves a.Service to the plugin and calls its Start.
func (p *Plugin) Start(ctx context.Context, a StartArgs) error {
	id := p.wc.Broker.NextId()
	ready := make(chan struct{})
	go p.wc.Broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(wire.ServerOptions(opts)...)
		pb.RegisterHostServer(s, &hostServer{s: a.Service})
		p.mu.Lock()
		p.server = s
		p.mu.Unlock()
		close(ready)
		return s
	})
	select {
	case <-ready:
	case <-ctx.Done():
		return fmt.Errorf("plugin %q: waiting for the host service to be served: %w", p.name, ctx.Err())
	}
	atts := make([]*pb.PodInterface, len(a.Attachments))
	for i, pi := range a.Attachments {
		atts[i] = toPBPodInterface(pi)
	}
	_, err := p.wc.Feature.Start(ctx, &pb.StartRequest{
		Assignment: toPBAssignment(a.Assignment), Node: toPBNodeFacts(a.Node), Config: a.Config, HostBrokerId: id, Attachments: atts,
		Cluster: &pb.ClusterAccess{
			Apiserver:  &pb.Endpoint{Url: a.Cluster.APIServer.URL, CaPem: a.Cluster.APIServer.CAPEM},
			Controller: &pb.Endpoint{Url: a.Cluster.Controller.URL, CaPem: a.Cluster.Controller.CAPEM},
		},
	})
	return fromStatus(err)
}

// Stop asks the plugin to stop (its Stopper, if any); unload says it is
// being disabled for good (sdk.StopRequest.Unload).
func (p *Plugin) Stop(ctx context.Context, unload bool) error {
	_, err := p.wc.Feature.Stop(ctx, &pb.StopRequest{Unload: unload})
	return fromStatus(err)
}

// CNIAdd forwards a CNI ADD.
func (p *Plugin) CNIAdd(ctx context.Context, a sdk.CNIArgs) (*sdk.CNIAddResponse, error) {
	r, err := p.wc.Feature.CNIAdd(ctx, toPBCNIArgs(a))
	if err != nil {
		return nil, fromStatus(err)
	}
	return fromPBCNIAddResponse(r)
}

// CNIDel forwards a CNI DEL.
func (p *Plugin) CNIDel(ctx context.Context, a sdk.CNIArgs) error {
	_, err := p.wc.Feature.CNIDel(ctx, toPBCNIArgs(a))
	return fromStatus(err)
}

// CNIGC forwards a CNI GC with the runtime's valid attachments. A plugin
// that does not implement sdk.CNIGarbageCollector removes nothing: (0, nil).
func (p *Plugin) CNIGC(ctx context.Context, valid []sdk.CNIAttachment, netConf []byte) (int, error) {
	req := &pb.CNIGCRequest{NetConf: netConf}
	for _, a := range valid {
		req.Valid = append(req.Valid, &pb.CNIAttachment{ContainerId: a.ContainerID, IfName: a.IfName})
	}
	resp, err := p.wc.Feature.CNIGC(ctx, req)
	if status.Code(err) == codes.Unimplemented {
		return 0, nil
	}
	if err != nil {
		return 0, fromStatus(err)
	}
	return int(resp.GetRemoved()), nil
}

// CNICheck forwards a CNI CHECK.
func (p *Plugin) CNICheck(ctx context.Context, a sdk.CNIArgs) error {
	_, err := p.wc.Feature.CNICheck(ctx, toPBCNIArgs(a))
	return fromStatus(err)
}

// PodInterfaceEvent forwards a pod interface change.
func (p *Plugin) PodInterfaceEvent(ctx context.Context, r sdk.PodInterfaceEventRequest) error {
	_, err := p.wc.Feature.PodInterfaceEvent(ctx, toPBPodInterfaceEvent(r))
	return fromStatus(err)
}

// PacketIn forwards a packet-in.
func (p *Plugin) PacketIn(ctx context.Context, r sdk.PacketInRequest) error {
	_, err := p.wc.Feature.PacketIn(ctx, toPBPacketIn(r))
	return fromStatus(err)
}

// NodeEvent forwards a node change.
func (p *Plugin) NodeEvent(ctx context.Context, r sdk.NodeEventRequest) error {
	_, err := p.wc.Feature.NodeEvent(ctx, toPBNodeEvent(r))
	return fromStatus(err)
}

// NodeFactsChanged tells the plugin the node's facts changed.
func (p *Plugin) NodeFactsChanged(ctx context.Context, r sdk.NodeFactsChangedRequest) error {
	_, err := p.wc.Feature.NodeFactsChanged(ctx, &pb.NodeFactsChangedRequest{Old: toPBNodeFacts(r.Old), New: toPBNodeFacts(r.New)})
	return fromStatus(err)
}

// Metrics asks the plugin for its own metrics (sdk.MetricsReporter).
func (p *Plugin) Metrics(ctx context.Context) ([]sdk.Metric, error) {
	resp, err := p.wc.Feature.Metrics(ctx, &pb.Empty{})
	if err != nil {
		return nil, fromStatus(err)
	}
	out := make([]sdk.Metric, 0, len(resp.GetMetrics()))
	for _, m := range resp.GetMetrics() {
		out = append(out, sdk.Metric{Name: m.GetName(), Help: m.GetHelp(), Kind: sdk.MetricKind(m.GetKind()), Labels: m.GetLabels(), Value: m.GetValue()})
	}
	return out, nil
}

// DescribeFlow asks the plugin what one of its flows means
// (sdk.FlowDescriber).
func (p *Plugin) DescribeFlow(ctx context.Context, r sdk.DescribeFlowRequest) (string, error) {
	resp, err := p.wc.Feature.DescribeFlow(ctx, &pb.DescribeFlowRequest{Table: r.Table, Priority: uint32(r.Priority), Match: r.Match, Tag: r.Tag})
	if err != nil {
		return "", fromStatus(err)
	}
	return resp.GetDescription(), nil
}
