// Command switchyard-agent is the Switchyard node agent: it owns the OVS
// integration bridge, runs the feature plugins listed in its config, and
// arbitrates the flows they submit. See host/agent.
//
//	switchyard-agent --config /etc/switchyard/agent.yaml
//
// SIGHUP reloads the config (loading and unloading plugins); SIGTERM and
// SIGINT stop the plugins and exit, leaving the flows on the switch.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"switchyard.dev/switchyard/host/agent"
	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/ovsdb"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "switchyard-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := pflag.NewFlagSet("switchyard-agent", pflag.ContinueOnError)
	config.Flags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	cfg, err := config.Load("", fs)
	if err != nil {
		return err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("node", cfg.NodeName)
	slog.SetDefault(log)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, err := ovsdb.Dial(dctx, cfg.OVS.DBSocket, cfg.Bridge.Name, log.With("component", "ovsdb"))
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.EnsureBridge(dctx, cfg.Bridge.DatapathType); err != nil {
		return err
	}
	sw, err := dialSwitch(dctx, cfg, log)
	if err != nil {
		return err
	}
	defer sw.Close()

	a, err := agent.New(cfg, sw, db, log)
	if err != nil {
		return err
	}
	sock, err := a.ServeAPI(ctx, cfg.SocketDir)
	if err != nil {
		return err
	}
	log.Info("switchyard-agent starting", "bridge", cfg.Bridge.Name, "plugins", len(cfg.Plugins), "api", sock)
	if err := a.Start(ctx); err != nil {
		return err
	}
	log.Info("switchyard-agent started")

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	for {
		select {
		case <-ctx.Done():
			log.Info("stopping plugins; flows stay installed")
			a.Stop()
			return nil
		case <-hup:
			ncfg, err := config.Load("", fs)
			if err != nil {
				log.Error("config reload refused; keeping the running config", "error", err)
				continue
			}
			log.Info("reloading config")
			a.Reload(ctx, ncfg)
		}
	}
}

// dialSwitch connects to the bridge's management socket, waiting for
// ovs-vswitchd to create it after the bridge was just added.
func dialSwitch(ctx context.Context, cfg *config.Config, log *slog.Logger) (*openflow.Conn, error) {
	for {
		sw, err := openflow.Dial(ctx, "unix", cfg.MgmtSocket(), openflow.Options{Logger: log, AsyncEvents: true})
		if err == nil {
			return sw, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to %s: %w (is ovs-vswitchd running?)", cfg.MgmtSocket(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
