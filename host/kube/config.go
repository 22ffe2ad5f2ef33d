package kube

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"switchyard.dev/switchyard/sdk"
)

// Access is how the agent reaches the apiserver, and what it hands plugins.
type Access struct {
	Config *rest.Config
	// Source says where Config came from, for logs: "in-cluster" or the
	// kubeconfig path.
	Source string
	// APIServer is the endpoint and CA plugins get in StartRequest.
	APIServer sdk.Endpoint
	// TokenFile is the ServiceAccount token file ("" if the credential is
	// not a token file).
	TokenFile string
}

// Connect picks the apiserver configuration: the kubeconfig when one is
// named (config, SWITCHYARD_KUBECONFIG or --kubeconfig), else the in-cluster
// config when the agent runs as a pod. It returns nil, nil when there is
// neither: the agent then runs without an apiserver.
func Connect(kubeconfig string) (*Access, error) {
	var a Access
	switch {
	case kubeconfig != "":
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w (point kubeconfig, SWITCHYARD_KUBECONFIG or --kubeconfig at a valid kubeconfig)", kubeconfig, err)
		}
		a.Config, a.Source = cfg, kubeconfig
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster apiserver config: %w (the agent's pod needs its ServiceAccount token mounted)", err)
		}
		a.Config, a.Source = cfg, "in-cluster"
	default:
		return nil, nil
	}
	a.Config.UserAgent = "switchyard-agent"
	a.APIServer.URL = a.Config.Host
	a.APIServer.CAPEM = a.Config.CAData
	if len(a.APIServer.CAPEM) == 0 && a.Config.CAFile != "" {
		b, err := os.ReadFile(a.Config.CAFile)
		if err != nil {
			return nil, fmt.Errorf("apiserver CA from %s: %w", a.Source, err)
		}
		a.APIServer.CAPEM = b
	}
	a.TokenFile = a.Config.BearerTokenFile
	return &a, nil
}

// Explain turns an apiserver call's error into one sentence naming the
// cause and the fix, for the errors an operator can do something about.
func Explain(server string, err error) string {
	var dnsErr *net.DNSError
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Sprintf("the apiserver at %s rejected the agent's credentials (401 Unauthorized): the token is expired, revoked or for another cluster; give the agent a valid ServiceAccount token", server)
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("cannot resolve the apiserver host of %s: %v; fix the server address in the kubeconfig", server, err)
	case strings.Contains(err.Error(), "x509:"), strings.Contains(err.Error(), "tls:"):
		return fmt.Sprintf("TLS with the apiserver at %s failed: %v; the kubeconfig's certificate-authority must be the CA that signed the apiserver's serving certificate", server, err)
	case isNetwork(err):
		return fmt.Sprintf("cannot reach the apiserver at %s: %v; check the server address in the kubeconfig and that the apiserver is running and reachable from this node", server, err)
	}
	return fmt.Sprintf("apiserver at %s: %v", server, err)
}

func isNetwork(err error) bool {
	var opErr *net.OpError
	var nerr net.Error
	var uerr *url.Error
	return errors.As(err, &opErr) || errors.As(err, &nerr) || errors.As(err, &uerr) ||
		strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "no route to host")
}
