package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ServiceAddress is a controller address that names a Kubernetes Service:
// name.namespace.svc[.cluster.local]:port.
type ServiceAddress struct {
	Name, Namespace string
	Port            int
}

// ParseServiceAddress recognises addr as a Service's DNS name; ok is false
// for plain host:port addresses, which are dialled as they are.
func ParseServiceAddress(addr string) (ServiceAddress, bool) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return ServiceAddress{}, false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return ServiceAddress{}, false
	}
	host = strings.TrimSuffix(strings.TrimSuffix(host, "."), ".cluster.local")
	parts := strings.Split(host, ".")
	if len(parts) != 3 || parts[2] != "svc" || parts[0] == "" || parts[1] == "" {
		return ServiceAddress{}, false
	}
	return ServiceAddress{Name: parts[0], Namespace: parts[1], Port: port}, true
}

// ServerName is the name the controller's certificate is checked against.
func (a ServiceAddress) ServerName() string { return a.Name + "." + a.Namespace + ".svc" }

// ServiceDiscovery reaches the controller through its Service as the
// apiserver describes it: the ready endpoints of its EndpointSlices, and the
// CA certificate the controller publishes in the ConfigMap <name>-ca. An
// agent runs in the host network before any cluster DNS or Service proxy
// works on its node (it is what makes them work), so it cannot resolve or
// route the Service's name the way a pod would.
type ServiceDiscovery struct {
	Kube kubernetes.Interface
	Addr ServiceAddress

	mu   sync.Mutex
	pool *x509.CertPool
}

// CAConfigMap is the ConfigMap holding the CA for the Service's certificate.
func (d *ServiceDiscovery) CAConfigMap() string { return d.Addr.Name + "-ca" }

// Endpoints lists host:port of the Service's ready endpoints for its port
// Addr.Port, in random order so agents spread over replicas. A Service
// without endpoints yields its cluster IP, which works once the node's
// Service proxy does.
func (d *ServiceDiscovery) Endpoints(ctx context.Context) ([]string, error) {
	svc, err := d.Kube.CoreV1().Services(d.Addr.Namespace).Get(ctx, d.Addr.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading Service %s/%s: %w", d.Addr.Namespace, d.Addr.Name, err)
	}
	portName, found := "", false
	for _, p := range svc.Spec.Ports {
		if int(p.Port) == d.Addr.Port {
			portName, found = p.Name, true
		}
	}
	if !found {
		return nil, fmt.Errorf("Service %s/%s has no port %d: fix controller.address in the agent config", d.Addr.Namespace, d.Addr.Name, d.Addr.Port)
	}
	slices, err := d.Kube.DiscoveryV1().EndpointSlices(d.Addr.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + d.Addr.Name})
	if err != nil {
		return nil, fmt.Errorf("listing EndpointSlices of Service %s/%s: %w", d.Addr.Namespace, d.Addr.Name, err)
	}
	var out []string
	for _, s := range slices.Items {
		for _, p := range s.Ports {
			if p.Port == nil || (p.Name != nil && *p.Name != portName) || (p.Name == nil && portName != "") {
				continue
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && !*e.Conditions.Ready {
					continue
				}
				for _, a := range e.Addresses {
					out = append(out, net.JoinHostPort(a, strconv.Itoa(int(*p.Port))))
				}
			}
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != "None" {
		out = append(out, net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(d.Addr.Port)))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("Service %s/%s has no ready endpoint: is the controller running?", d.Addr.Namespace, d.Addr.Name)
	}
	return out, nil
}

// Dial connects to the first endpoint that answers; the address gRPC
// passes is the Service name and is not used.
func (d *ServiceDiscovery) Dial(ctx context.Context, _ string) (net.Conn, error) {
	eps, err := d.Endpoints(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	var nd net.Dialer
	for _, ep := range eps {
		c, err := nd.DialContext(ctx, "tcp", ep)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("no endpoint of Service %s/%s answers: %w", d.Addr.Namespace, d.Addr.Name, errors.Join(errs...))
}

// TLSConfig checks the controller's certificate for the Service's name
// against the published CA, read again when a check fails so a CA the
// controller replaced is picked up without restarting the agent. base's
// RootCAs, when set, are used as they are (a CA from the agent config).
func (d *ServiceDiscovery) TLSConfig(base *tls.Config) *tls.Config {
	c := base.Clone()
	if c == nil {
		c = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	c.ServerName = d.Addr.ServerName()
	if c.RootCAs != nil {
		return c
	}
	// Verification moves into VerifyConnection, which can fetch the CA.
	c.InsecureSkipVerify = true
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the controller sent no certificate")
		}
		ctx, cancel := context.WithTimeout(context.Background(), dialCATimeout)
		defer cancel()
		inter := x509.NewCertPool()
		for _, ic := range cs.PeerCertificates[1:] {
			inter.AddCert(ic)
		}
		verify := func(refresh bool) (caErr, err error) {
			pool, err := d.caPool(ctx, refresh)
			if err != nil {
				return err, nil
			}
			_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: c.ServerName})
			return nil, err
		}
		// The cached CA first; on failure the published one, once.
		if caErr, err := verify(false); caErr != nil || err == nil {
			return caErr
		}
		caErr, err := verify(true)
		if caErr != nil {
			return caErr
		}
		if err != nil {
			return fmt.Errorf("the controller's certificate is not signed by the CA in ConfigMap %s/%s: %w", d.Addr.Namespace, d.CAConfigMap(), err)
		}
		return nil
	}
	return c
}

const dialCATimeout = 10 * time.Second

func (d *ServiceDiscovery) caPool(ctx context.Context, refresh bool) (*x509.CertPool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pool != nil && !refresh {
		return d.pool, nil
	}
	cm, err := d.Kube.CoreV1().ConfigMaps(d.Addr.Namespace).Get(ctx, d.CAConfigMap(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the controller's CA from ConfigMap %s/%s: %w", d.Addr.Namespace, d.CAConfigMap(), err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data["ca.crt"])) {
		return nil, fmt.Errorf("ConfigMap %s/%s holds no PEM certificate under ca.crt", d.Addr.Namespace, d.CAConfigMap())
	}
	d.pool = pool
	return pool, nil
}
