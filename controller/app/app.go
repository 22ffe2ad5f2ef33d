package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"switchyard.dev/switchyard/controller/compute"
	"switchyard.dev/switchyard/controller/distribute"
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
	Workers int
	Log     *slog.Logger
}

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
		cfg.Workers = 2
	}
	kube, err := kubernetes.NewForConfig(cfg.Kube)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg.Kube)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	engine := compute.New(log.With("component", "compute"))
	hub := distribute.NewHub(engine, log.With("component", "distribute"), cfg.LogSize)
	var ctrl *reconcile.Controller
	real := distribute.NewRealization(func(uids []string) { ctrl.RealizationChanged(uids) })
	ctrl = reconcile.New(reconcile.Options{Log: log.With("component", "reconcile"), Engine: engine, Realization: real, Kube: kube, Dynamic: dyn})
	srv := &distribute.Server{
		Hub:         hub,
		Auth:        &distribute.TokenReviewAuthenticator{Client: kube, Audiences: cfg.Audiences, AllowedServiceAccounts: cfg.AllowedServiceAccounts},
		Realization: real,
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
	errc := make(chan error, 2)
	go func() { errc <- ctrl.Run(ctx, cfg.Workers) }()
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
