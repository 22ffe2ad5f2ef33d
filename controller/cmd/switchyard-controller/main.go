// Command switchyard-controller computes network policy for the cluster and
// streams each node its span over gRPC. See controller/app for the wiring.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"switchyard.dev/switchyard/controller/app"
	"switchyard.dev/switchyard/controller/selfsign"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "switchyard-controller:", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig path; empty uses the in-cluster config")
	listen := flag.String("listen", ":10349", "address of the PolicyDistribution gRPC API")
	certFile := flag.String("tls-cert", "", "TLS certificate for the API (PEM); empty: a self-signed one kept in -tls-secret")
	keyFile := flag.String("tls-key", "", "TLS key for the API (PEM)")
	namespace := flag.String("namespace", envOr("POD_NAMESPACE", "kube-system"), "namespace of the controller's Service, Secret and CA ConfigMap")
	service := flag.String("service", "switchyard-controller", "the controller's Service: the self-signed certificate covers its DNS names")
	tlsSecret := flag.String("tls-secret", "switchyard-controller-tls", "Secret holding the self-signed CA and serving certificate (created if absent)")
	caConfigMap := flag.String("ca-configmap", "switchyard-controller-ca", "ConfigMap where the self-signed CA certificate is published for agents")
	insecure := flag.Bool("insecure", false, "serve the API without TLS (tokens travel in clear; tests only)")
	sas := flag.String("allowed-service-accounts", "kube-system/switchyard-agent", "comma-separated namespace/name of ServiceAccounts nodes use; empty allows any")
	audiences := flag.String("token-audiences", "", "comma-separated audiences node tokens must carry; empty uses the apiserver's")
	logLevel := flag.String("log-level", "info", "debug, info, warn or error")
	metricsListen := flag.String("metrics-listen", ":10353", "address serving Prometheus /metrics; empty serves none")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level %q: use debug, info, warn or error", *logLevel)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	var cfg *rest.Config
	var err error
	if *kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", *kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("kubernetes config: %w", err)
	}
	var creds credentials.TransportCredentials
	switch {
	case *certFile != "" && *keyFile != "":
		if creds, err = credentials.NewServerTLSFromFile(*certFile, *keyFile); err != nil {
			return fmt.Errorf("loading -tls-cert/-tls-key: %w", err)
		}
	case *certFile != "" || *keyFile != "":
		return fmt.Errorf("set both -tls-cert and -tls-key, or neither for a self-signed certificate")
	case *insecure:
		log.Warn("serving the distribution API without TLS")
	default:
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("kubernetes client: %w", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cert, _, err := selfsign.Ensure(ctx, kube, selfsign.Config{Namespace: *namespace, Secret: *tlsSecret, ConfigMap: *caConfigMap,
			DNSNames: selfsign.ServiceDNSNames(*service, *namespace)})
		cancel()
		if err != nil {
			return fmt.Errorf("self-signed TLS (or pass -tls-cert and -tls-key): %w", err)
		}
		creds = credentials.NewServerTLSFromCert(&cert)
		log.Info("serving with the self-signed certificate", "secret", *namespace+"/"+*tlsSecret, "caConfigMap", *namespace+"/"+*caConfigMap)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on -listen %q: %w", *listen, err)
	}
	var ml net.Listener
	if *metricsListen != "" {
		if ml, err = net.Listen("tcp", *metricsListen); err != nil {
			return fmt.Errorf("listening on -metrics-listen %q: %w (pick a free port, or empty to serve no metrics)", *metricsListen, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return app.Run(ctx, app.Config{
		Kube: cfg, Listener: l, TLS: creds, Log: log, MetricsListener: ml,
		AllowedServiceAccounts: splitList(*sas), Audiences: splitList(*audiences),
	})
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
