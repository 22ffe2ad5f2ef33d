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
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"switchyard.dev/switchyard/host/agent"
	"switchyard.dev/switchyard/host/cniserver"
	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/kube"
	"switchyard.dev/switchyard/host/metrics"
	"switchyard.dev/switchyard/host/traceflowcr"
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
	if m := agent.UnderlayMirror(cfg, log); m != nil {
		// Before any plugin starts, so the first tunnel packet finds its
		// route; then it follows the kernel.
		if err := m.Sync(dctx); err != nil {
			log.Warn("underlay routes not yet mirrored into ovs-vswitchd; retrying", "error", err)
		}
		go m.Run(ctx)
	}

	a, err := agent.New(cfg, sw, db, log)
	if err != nil {
		return err
	}
	acc, err := kube.Connect(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	if err := clusterAccess(a, cfg, acc); err != nil {
		return err
	}
	sock, err := a.ServeAPI(ctx, cfg.SocketDir)
	if err != nil {
		return err
	}
	if cfg.Health.Port != 0 {
		addr, err := a.ServeHealth(ctx, net.JoinHostPort(cfg.Health.BindAddress, strconv.Itoa(cfg.Health.Port)))
		if err != nil {
			return err
		}
		log.Info("serving /readyz and /livez", "address", addr)
	}
	if cfg.Metrics.Port != 0 {
		addr, err := metrics.Serve(ctx, net.JoinHostPort(cfg.Metrics.BindAddress, strconv.Itoa(cfg.Metrics.Port)), "agent", a.Metrics().Registry, log)
		if err != nil {
			return err
		}
		log.Info("serving /metrics", "address", addr)
	}

	// The CNI server starts first, so an ADD that arrives while the agent
	// is still starting waits for it (up to readyWait) instead of finding
	// no socket; it asks the agent for the CNI plugin on every request, so
	// a restarted plugin is used as soon as it is back.
	cni, err := cniserver.StartNode(ctx, cniserver.NodeOptions{
		SocketDir: cfg.SocketDir, StateDir: cfg.RunDir, Ports: agent.PortView{DB: db}, Logger: log,
		Handler:   a.CNIPlugin,
		WaitReady: func(ctx context.Context) error { return a.WaitReady(ctx, cfg.ReadyWait) },
		Observe:   a.Metrics().ObserveCNI,
		Begin:     a.CNIBegin,
	})
	if err != nil {
		return fmt.Errorf("starting the CNI server: %w", err)
	}
	defer cni.Stop(5 * time.Second)
	a.SetAttachments(cni.Attachments)
	log.Info("serving CNI", "socket", cni.Socket)

	switch {
	case acc != nil:
		klog.SetSlogLogger(log.With("component", "client-go"))
		stopWatch, err := a.JoinCluster(ctx, acc)
		if err != nil {
			return err
		}
		defer stopWatch()
	case len(cfg.Node.PodCIDRs) == 0:
		return errors.New("no apiserver to learn this node's pod CIDRs from: the agent does not run as a pod and no kubeconfig is set; " +
			"set kubeconfig (SWITCHYARD_KUBECONFIG, --kubeconfig), or node.podCIDRs for a static setup")
	default:
		log.Info("no apiserver configured; node facts come from the config only")
	}
	if err := a.WaitNodeFacts(ctx, 5*time.Second); err != nil {
		return nil // stopped while waiting
	}
	log.Info("switchyard-agent starting plugins", "bridge", cfg.Bridge.Name, "plugins", len(cfg.Plugins), "api", sock)
	if err := a.Start(ctx); err != nil {
		return err
	}
	cni.Subscribe(a.PodInterfaceEvent)
	if acc != nil {
		stopStatus, err := a.ReportStatus(ctx, acc)
		if err != nil {
			return err
		}
		defer stopStatus()
		stopTraces, err := serveTraceflows(ctx, a, acc, log)
		if err != nil {
			return err
		}
		defer stopTraces()
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

// clusterAccess tells the agent what plugins get to reach the cluster: the
// apiserver it uses itself, the controller from the config, and the
// agent's own ServiceAccount token.
func clusterAccess(a *agent.Agent, cfg *config.Config, acc *kube.Access) error {
	var api, ctrl sdk.Endpoint
	var token func() (string, time.Time, error)
	tokenFile := cfg.TokenFile
	if acc != nil {
		api = acc.APIServer
		if tokenFile == "" {
			tokenFile = acc.TokenFile
		}
		if tokenFile == "" && acc.Config.BearerToken != "" {
			static := acc.Config.BearerToken
			token = func() (string, time.Time, error) { return static, kube.Expiry(static), nil }
		}
	}
	if tokenFile != "" {
		token = (&kube.TokenFile{Path: tokenFile}).Token
		if _, _, err := token(); err != nil {
			return fmt.Errorf("%w (tokenFile: the agent's ServiceAccount token, handed to plugins)", err)
		}
	}
	if cfg.Controller.Address != "" {
		ctrl.URL = cfg.Controller.Address
		if cfg.Controller.CAFile != "" {
			b, err := os.ReadFile(cfg.Controller.CAFile)
			if err != nil {
				return fmt.Errorf("controller.caFile: %w", err)
			}
			ctrl.CAPEM = b
		}
	}
	a.SetClusterAccess(api, ctrl, token)
	return nil
}

// serveTraceflows runs this node's part of the cluster's Traceflow objects.
func serveTraceflows(ctx context.Context, a *agent.Agent, acc *kube.Access, log *slog.Logger) (stop func(), err error) {
	// Its own request budget: client-go's default (5/s, burst 10) would
	// queue a burst of traces behind each other, three requests each.
	cfg := rest.CopyConfig(acc.Config)
	cfg.QPS, cfg.Burst = 50, 100
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	srv := &traceflowcr.Server{Node: a.NodeFacts().Name, Tracer: a, Kube: kc, Dyn: dyn, Log: log.With("component", "traceflow")}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(ctx) }()
	return func() { cancel(); <-done }, nil
}
