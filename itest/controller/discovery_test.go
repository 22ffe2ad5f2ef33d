package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"switchyard.dev/switchyard/controller/app"
	"switchyard.dev/switchyard/controller/client"
	"switchyard.dev/switchyard/controller/selfsign"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/testenv"
)

// streamWatcher records whether the policy stream is up and why it fell.
type streamWatcher struct {
	mu  sync.Mutex
	up  bool
	err error
}

func (w *streamWatcher) Replace(*client.State)              {}
func (w *streamWatcher) Apply(*client.State, client.Change) {}
func (w *streamWatcher) StreamChanged(up bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.up = up
	if err != nil {
		w.err = err
	}
}

func (w *streamWatcher) state() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.up, w.err
}

// An agent in the host network has neither cluster DNS nor a Service proxy
// when it starts, yet its config names the controller by Service. The client
// finds the endpoint through the apiserver's EndpointSlices and trusts the CA
// the controller published, with the controller's own self-signed
// certificate, exactly as the shipped manifests run them.
func TestControllerFoundThroughService(t *testing.T) {
	cp := controlplane.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dyn, err := dynamic.NewForConfig(cp.Config)
	must(t, "dynamic client", err)
	e := &env{t: t, cp: cp, dyn: dyn, ctx: ctx}
	installCRDs(t, e)
	e.createNode("n1")
	e.createSA("kube-system", agentSA)
	token := e.agentToken(agentSA, "n1")

	cert, caPEM, err := selfsign.Ensure(ctx, cp.Client, selfsign.Config{Namespace: "kube-system", Secret: "switchyard-controller-tls",
		ConfigMap: "switchyard-controller-ca", DNSNames: selfsign.ServiceDNSNames("switchyard-controller", "kube-system")})
	must(t, "self-signed TLS", err)
	if len(caPEM) == 0 {
		t.Fatal("no CA returned")
	}
	// EndpointSlices refuse loopback addresses: serve on this host's own.
	hostIP := hostAddress(t)
	l, err := net.Listen("tcp", net.JoinHostPort(hostIP, "0"))
	must(t, "listening", err)
	runController(t, app.Config{Kube: cp.Config, Listener: l, TLS: credentials.NewServerTLSFromCert(&cert),
		AllowedServiceAccounts: []string{"kube-system/" + agentSA}, Log: slog.New(slog.DiscardHandler)})

	// The Service as manifests/controller.yaml declares it, and the slice
	// kube-controller-manager would write for the hostNetwork controller.
	_, err = cp.Client.CoreV1().Services("kube-system").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "switchyard-controller"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "distribution", Port: 10349, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", Port: 10353, Protocol: corev1.ProtocolTCP},
		}},
	}, metav1.CreateOptions{})
	must(t, "creating the controller Service", err)
	_, portStr, _ := net.SplitHostPort(l.Addr().String())
	port, _ := strconv.Atoi(portStr)
	p32, metricsPort, ready, notReady := int32(port), int32(1), true, false
	dist, metrics := "distribution", "metrics"
	_, err = cp.Client.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "switchyard-controller-x", Labels: map[string]string{discoveryv1.LabelServiceName: "switchyard-controller"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{hostIP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			// A terminating replica must not be dialled.
			{Addresses: []string{"192.0.2.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: &dist, Port: &p32}, {Name: &metrics, Port: &metricsPort}},
	}, metav1.CreateOptions{})
	must(t, "creating the controller's EndpointSlice", err)

	addr := "switchyard-controller.kube-system.svc:10349"
	sa, ok := client.ParseServiceAddress(addr)
	if !ok {
		t.Fatalf("%s not recognised as a Service address", addr)
	}
	d := &client.ServiceDiscovery{Kube: cp.Client, Addr: sa}
	eps, err := d.Endpoints(ctx)
	must(t, "listing endpoints", err)
	if eps[0] != l.Addr().String() {
		t.Fatalf("first endpoint %v, want the ready controller %s (then the cluster IP)", eps, l.Addr())
	}
	connect := func(t *testing.T) (*streamWatcher, func()) {
		w := &streamWatcher{}
		cl, err := client.New(client.Config{Address: addr, NodeName: "n1", Handler: w, TLS: &tls.Config{MinVersion: tls.VersionTLS12},
			Token: func(context.Context) (string, error) { return token, nil }, Discovery: &client.ServiceDiscovery{Kube: cp.Client, Addr: sa},
			MaxBackoff: 200 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
		must(t, "client", err)
		cctx, ccancel := context.WithCancel(ctx)
		ran := make(chan struct{})
		go func() { defer close(ran); cl.Run(cctx) }()
		return w, func() { ccancel(); <-ran; cl.Close() }
	}

	t.Run("synced over TLS with the published CA", func(t *testing.T) {
		w, closeFn := connect(t)
		defer closeFn()
		must(t, "stream up", testenv.Eventually("policy stream synced", 30*time.Second, 50*time.Millisecond, func() error {
			if up, err := w.state(); !up {
				return errors.Join(errors.New("not synced"), err)
			}
			return nil
		}))
	})

	t.Run("a CA that did not sign the controller is refused with its ConfigMap named", func(t *testing.T) {
		_, otherCA, err := selfsign.Ensure(ctx, cp.Client, selfsign.Config{Namespace: "default", Secret: "other",
			ConfigMap: "other-ca", DNSNames: []string{"x"}})
		must(t, "a foreign CA", err)
		cm, err := cp.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "switchyard-controller-ca", metav1.GetOptions{})
		must(t, "reading CA ConfigMap", err)
		cm.Data["ca.crt"] = string(otherCA)
		_, err = cp.Client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{})
		must(t, "replacing CA ConfigMap", err)
		// A fresh discovery has no cached pool: it reads the replaced CA.
		d := &client.ServiceDiscovery{Kube: cp.Client, Addr: sa}
		raw, err := d.Dial(ctx, addr)
		must(t, "dialing through the Service", err)
		conn := tls.Client(raw, d.TLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
		defer conn.Close()
		err = conn.HandshakeContext(ctx)
		if err == nil || !strings.Contains(err.Error(), "switchyard-controller-ca") {
			t.Fatalf("handshake under a foreign CA: got %v, want a refusal naming ConfigMap kube-system/switchyard-controller-ca", err)
		}
		w, closeFn := connect(t)
		defer closeFn()
		time.Sleep(2 * time.Second)
		if up, _ := w.state(); up {
			t.Fatal("policy stream came up under a CA that did not sign the controller")
		}
	})
}

// hostAddress is a global unicast IPv4 address of this machine.
func hostAddress(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	must(t, "listing addresses", err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("this machine has no global unicast IPv4 address to serve the controller on")
	return ""
}
