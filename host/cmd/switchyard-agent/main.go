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
	"switchyard.dev/switchyard/host/cniserver"
	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/sdk"
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
	sw, db, err := agent.Connect(dctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
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

	// The CNI server starts after the plugins, so the first ADD finds the
	// CNI plugin running; it asks the agent for that plugin on every
	// request, so a restarted plugin is used as soon as it is back.
	cni, err := cniserver.StartNode(ctx, cniserver.NodeOptions{
		SocketDir: cfg.SocketDir, StateDir: cfg.RunDir, Ports: agent.PortView{DB: db}, Logger: log,
		Handler: func() (sdk.CNIHandler, bool) {
			p, ok := a.CNIPlugin()
			if !ok {
				return nil, false
			}
			return cniserver.FromPlugin(p), true
		},
		Publish: a.PodInterfaceEvent,
	})
	if err != nil {
		a.Stop()
		return fmt.Errorf("starting the CNI server: %w", err)
	}
	defer cni.Stop(5 * time.Second)
	log.Info("serving CNI", "socket", cni.Socket)

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
