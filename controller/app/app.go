package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/controller/compute"
	"switchyard.dev/switchyard/controller/distribute"
	"switchyard.dev/switchyard/controller/egress"
	"switchyard.dev/switchyard/controller/metrics"
	"switchyard.dev/switchyard/controller/reconcile"
)

// Config configures a controller.
type Config struct {
	Kube *rest.Config
	// Listener serves the PolicyDistribution API.
	Listener net.Listener
	// TLS secures the API; nil serves plaintext (tests, or behind a mesh).
	TLS credentials.TransportCredentials
	// AllowedServiceAccounts ("namespace/name") may watch; empty allows all.
	AllowedServiceAccounts []string
	// Audiences for TokenReview; empty means the apiserver's.
	Audiences []string
	// LogSize is the per-node event history; 0 means the default.
	LogSize int
	// Workers is how many keys are synced at once; 0 means defaultWorkers.
	Workers int
	Log     *slog.Logger
	// MetricsListener, if set, serves Prometheus /metrics.
	MetricsListener net.Listener
}

// defaultWorkers: the engine serializes on one lock, so a second worker
// only overlaps lister reads and decoding with computation.
const defaultWorkers = 2

// Run runs the controller until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Kube == nil || cfg.Listener == nil {
		return errors.New("app: Kube and Listener are required")
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	if cfg.Workers <= 0 {
		cfg.Workers = defaultWorkers
	}
	kube, err := kubernetes.NewForConfig(cfg.Kube)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg.Kube)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	var m *metrics.Controller
	p := assemble(log, kube, dyn, cfg.LogSize, func(kind string, took time.Duration) {
		if m != nil {
			m.ObserveCompute(kind, took)
		}
	})
	ctrl := p.ctrl
	m = metrics.New(metrics.Sources{Objects: ctrl.ObjectCounts, Streams: p.hub.Streams})
	srv := &distribute.Server{
		Hub: p.hub,
		Auth: &distribute.TokenReviewAuthenticator{Client: kube, Audiences: cfg.Audiences, AllowedServiceAccounts: cfg.AllowedServiceAccounts,
			Failed: m.TokenReviewFailed},
		Realization: p.real,
		NodeKnown:   ctrl.NodeKnown,
		Ready:       ctrl.Ready(),
		Log:         log.With("component", "server"),
	}
	var opts []grpc.ServerOption
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(cfg.TLS))
	}
	gs := grpc.NewServer(opts...)
	srv.Register(gs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.MetricsListener != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			<-ctx.Done()
			_ = ms.Close()
		}()
		go func() {
			if err := ms.Serve(cfg.MetricsListener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics endpoint stopped", "error", err)
			}
		}()
		log.Info("serving /metrics", "addr", cfg.MetricsListener.Addr().String())
	}
	infoDone := make(chan struct{})
	go func() {
		defer close(infoDone)
		runInfo(ctx, dyn.Resource(crdv1.ControllerInfosResource), p.hub.Streams, log.With("component", "info"))
	}()
	defer func() { cancel(); <-infoDone }()
	errc := make(chan error, 2)
	go func() { errc <- ctrl.Run(ctx, cfg.Workers) }()
	// Egress IP allocation is independent of policy: it has its own
	// informers and never blocks the policy stream.
	go func() {
		if err := egress.New(dyn, log).Run(ctx); err != nil {
			log.Error("egress allocation stopped", "error", err)
		}
	}()
	go func() { errc <- gs.Serve(cfg.Listener) }()
	log.Info("switchyard-controller serving", "addr", cfg.Listener.Addr().String(), "tls", cfg.TLS != nil)
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	cancel()
	gs.Stop()
	// Collect the other goroutine.
	second := <-errc
	if first == nil && !errors.Is(second, grpc.ErrServerStopped) {
		first = second
	}
	if errors.Is(first, grpc.ErrServerStopped) {
		first = nil
	}
	return first
}

// parts is the controller behind the gRPC server: engine, distribution hub,
// realization store and the informer-driven reconciler.
type parts struct {
	engine *compute.Engine
	hub    *distribute.Hub
	real   *distribute.Realization
	ctrl   *reconcile.Controller
}

// assemble wires the parts over the given clients. Run and the end-to-end
// benchmark (fake clientsets) both build the controller here.
func assemble(log *slog.Logger, kube kubernetes.Interface, dyn dynamic.Interface, logSize int, observe func(string, time.Duration)) *parts {
	p := &parts{engine: compute.New(log.With("component", "compute"))}
	p.hub = distribute.NewHub(p.engine, log.With("component", "distribute"), logSize)
	p.real = distribute.NewRealization(func(uids []string) { p.ctrl.RealizationChanged(uids) })
	p.ctrl = reconcile.New(reconcile.Options{Log: log.With("component", "reconcile"), Engine: p.engine, Realization: p.real, Kube: kube, Dynamic: dyn, Observe: observe})
	return p
}
