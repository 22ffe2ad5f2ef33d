// Package wire is the contract both halves of the plugin connection share:
// the go-plugin handshake, the plugin map keyed by API version, and the gRPC
// plugin type. Package sdk (plugin side) and package sdkhost (host side)
// build on it; nothing else should.
package wire

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

// PluginName is the single plugin every Switchyard plugin process serves.
const PluginName = "feature"

// MaxMessageSize bounds one gRPC message. A batch of 10,000 flows is a few
// megabytes; the host's own batch-size limit is the real bound.
const MaxMessageSize = 256 << 20

// Handshake keeps a plugin binary from being run by hand (or by the wrong
// host) and doing something surprising. ProtocolVersion is only the
// fallback; the real version negotiation uses VersionedPlugins.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "SWITCHYARD_PLUGIN",
	MagicCookieValue: "7f3c2a9e-switchyard-feature",
}

// FeaturePlugin is the go-plugin GRPCPlugin. On the plugin side NewServer is
// set; on the host side it is nil and GRPCClient returns a *Client.
type FeaturePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	NewServer func(*plugin.GRPCBroker) pb.FeatureServer
}

var _ plugin.GRPCPlugin = (*FeaturePlugin)(nil)

// GRPCServer registers the Feature service.
func (p *FeaturePlugin) GRPCServer(b *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterFeatureServer(s, p.NewServer(b))
	return nil
}

// Client is what the host dispenses.
type Client struct {
	Feature pb.FeatureClient
	Broker  *plugin.GRPCBroker
}

// GRPCClient returns the host's view of the plugin.
func (p *FeaturePlugin) GRPCClient(_ context.Context, b *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{Feature: pb.NewFeatureClient(c), Broker: b}, nil
}

// PluginSets returns the go-plugin VersionedPlugins map for the given API
// versions, all served by p.
func PluginSets(p *FeaturePlugin, versions ...int) map[int]plugin.PluginSet {
	out := map[int]plugin.PluginSet{}
	for _, v := range versions {
		out[v] = plugin.PluginSet{PluginName: p}
	}
	return out
}

// window is the HTTP/2 flow-control window: a batch of 5,000 flows is about
// 400 KB, and with gRPC's 64 KB default each batch waits for several window
// updates between two processes on a busy node.
const window = 16 << 20

// ServerOptions are added to every gRPC server of the connection.
func ServerOptions(opts []grpc.ServerOption) []grpc.ServerOption {
	return append(opts, grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.InitialWindowSize(window), grpc.InitialConnWindowSize(window),
		grpc.ReadBufferSize(1<<20), grpc.WriteBufferSize(1<<20))
}

// DialOptions are added to every gRPC client of the connection.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
		grpc.WithInitialWindowSize(window), grpc.WithInitialConnWindowSize(window),
		grpc.WithReadBufferSize(1 << 20), grpc.WithWriteBufferSize(1 << 20),
	}
}
