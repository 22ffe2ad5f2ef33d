package sdk

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"switchyard.dev/switchyard/sdk/internal/testhook"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"switchyard.dev/switchyard/sdk/internal/wire"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

// Serve runs f as a Switchyard plugin. It is the only call a plugin's main
// needs, and it does not return while the host is connected; when the host
// goes away the process exits.
//
// Run by hand (not by switchyard-agent), it prints an explanation and exits
// with status 1.
func Serve(f Feature) {
	serve(f, APIVersion, os.Stderr)
}

func serve(f Feature, version int, stderr io.Writer) {
	if os.Getenv(wire.Handshake.MagicCookieKey) != wire.Handshake.MagicCookieValue {
		fmt.Fprintln(stderr, "This is a Switchyard plugin. It is started by switchyard-agent "+
			"(list it under plugins: in the agent config), not run by hand.")
		os.Exit(1)
	}
	logger := slog.New(newHostLogHandler(stderr, slog.LevelDebug))
	slog.SetDefault(logger)
	go exitWhenOrphaned(logger)

	p := &wire.FeaturePlugin{NewServer: func(b *plugin.GRPCBroker) pb.FeatureServer {
		return &featureServer{f: f, broker: b, logger: logger}
	}}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: wire.PluginSets(p, version),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(wire.ServerOptions(opts)...)
		},
		Logger: hclog.New(&hclog.LoggerOptions{Output: stderr, JSONFormat: true, Level: hclog.Warn}),
	})
}

// exitWhenOrphaned ends the plugin if its host dies without stopping it
// (kill -9): a restarted host starts fresh plugin processes, and an orphan
// would only hold sockets and memory.
func exitWhenOrphaned(logger *slog.Logger) {
	parent := os.Getppid()
	for {
		time.Sleep(500 * time.Millisecond)
		if os.Getppid() != parent {
			logger.Warn("host process is gone, exiting", "old_host_pid", parent)
			os.Exit(2)
		}
	}
}

func init() {
	testhook.FeaturePlugin = func(f any, logger *slog.Logger) *wire.FeaturePlugin {
		return &wire.FeaturePlugin{NewServer: func(b *plugin.GRPCBroker) pb.FeatureServer {
			return &featureServer{f: f.(Feature), broker: b, logger: logger}
		}}
	}
}
