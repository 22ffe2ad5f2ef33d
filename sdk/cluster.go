package sdk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Cluster is how a plugin reaches the cluster beyond its node: the
// apiserver (service-proxy and egress watch their kinds there) and the
// Switchyard controller (netpol's per-node policy stream). The host hands it
// over in StartRequest; a plugin never reads the agent's own files (its
// kubeconfig, ServiceAccount token or CA bundle) itself.
type Cluster struct {
	// APIServer is the kube-apiserver; URL is empty when the agent runs
	// without one (a static test setup).
	APIServer Endpoint
	// Controller is switchyard-controller's distribution endpoint; URL is
	// empty when the agent's config names none.
	Controller Endpoint
	// Tokens yields the agent's pod-bound ServiceAccount token, the bearer
	// credential both endpoints accept. Ask it for every new connection or
	// request: the host keeps the token fresh, and an old one expires.
	Tokens TokenSource
}

// Endpoint is a TLS endpoint and the CA that signs its certificate.
type Endpoint struct {
	// URL is https://host:port for the apiserver, host:port for the
	// controller's gRPC endpoint.
	URL string
	// CAPEM is the PEM bundle to trust for URL; empty means the system pool.
	CAPEM []byte
}

// TLSConfig returns a client TLS configuration trusting e.CAPEM.
func (e Endpoint) TLSConfig() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(e.CAPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(e.CAPEM) {
			return nil, fmt.Errorf("%w: the CA bundle for %s holds no PEM certificate", ErrInvalid, e.URL)
		}
		c.RootCAs = pool
	}
	return c, nil
}

// TokenSource yields a bearer token that is valid now.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// ErrNoToken: the host has no token to give (it runs without cluster
// credentials).
var ErrNoToken = errors.New("the host has no cluster token")

// cachedTokens asks the host for the token and keeps it for a short while,
// well inside the token's lifetime, so a plugin may call Token per request.
type cachedTokens struct {
	fetch func(ctx context.Context) (token string, expiry time.Time, err error)
	now   func() time.Time

	mu     sync.Mutex
	token  string
	reuse  time.Time // ask the host again after this
	expiry time.Time
}

// tokenReuse bounds how long a token is reused before asking the host again:
// the host rotates the token file well before expiry, and a minute-old copy
// is never stale by more than a minute of that margin.
const tokenReuse = time.Minute

func (c *cachedTokens) Token(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.token != "" && now.Before(c.reuse) {
		return c.token, nil
	}
	t, exp, err := c.fetch(ctx)
	if err != nil {
		return "", err
	}
	c.token, c.expiry = t, exp
	c.reuse = now.Add(tokenReuse)
	if !exp.IsZero() && exp.Sub(now)/2 < tokenReuse {
		c.reuse = now.Add(exp.Sub(now) / 2)
	}
	return t, nil
}
