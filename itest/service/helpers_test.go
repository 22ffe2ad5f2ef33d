package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

// env is a running cluster with podnet, tunnel and service on every node
// (or, in the benchmark's baseline, kube-proxy in place of service).
type env struct {
	cp     *controlplane.ControlPlane
	c      *cluster.Cluster
	agents map[string]*nodeagent.Agent

	// The kube-proxy baseline (kubeproxy_test.go), by node name.
	kpBin        string
	kubeProxies  map[string]*kubeProxy
	kpKubeconfig map[string]string
}

// proxy says what serves the cluster's Services.
type proxy int

const (
	// proxyPlugin is Switchyard's service plugin, enabled on every agent.
	proxyPlugin proxy = iota
	// proxyKube is the benchmark's baseline: the agents run podnet and
	// tunnel only, and kube-proxy (nftables mode) runs on every node.
	proxyKube
)

const ns = "svc"

// Ports the test servers listen on in every backend pod.
const (
	echoPort   = 8080 // probe.Serve: TCP and UDP echo, SCTP INIT answer
	whoamiPort = 9090 // the pod's name, over TCP and UDP
	longPort   = 7070 // a TCP echo without deadline, for long connections
)

// start brings up nodes with podnet, tunnel and service on every agent.
func start(t testenv.T, nodes int) *env { return startWith(t, nodes, proxyPlugin) }

// startWith brings up nodes whose Services p serves.
func startWith(t testenv.T, nodes int, p proxy) *env { return startEnv(t, nodes, p, false) }

// startDualStack brings up dual-stack nodes (IPv6 pod CIDRs and IPv6
// InternalIPs) with service on every agent, whose apiserver and plugins
// have an IPv4 and an IPv6 Service CIDR.
func startDualStack(t testenv.T, nodes int) *env { return startEnv(t, nodes, proxyPlugin, true) }

func startEnv(t testenv.T, nodes int, p proxy, dualStack bool) *env {
	t.Helper()
	if binsErr != nil {
		t.Fatalf("a binary the test runs did not build: %v", binsErr)
	}
	e := &env{agents: map[string]*nodeagent.Agent{}, kubeProxies: map[string]*kubeProxy{}, kpKubeconfig: map[string]string{}}
	e.cp = controlplane.StartWithOptions(t, controlplane.Options{DualStackServices: dualStack})
	cidrs := []string{controlplane.ServiceCIDR}
	if dualStack {
		cidrs = append(cidrs, controlplane.ServiceCIDRv6)
	}
	nb := nodeagent.Binaries{Agent: bins["switchyard-agent"], CNI: bins["switchyard-cni"],
		Plugins: map[string]string{"podnet": bins["podnet"], "tunnel": bins["tunnel"], "service": bins["service"]}}
	enabled := []string{"podnet", "tunnel", "service"}
	if p == proxyKube {
		enabled = enabled[:2]
	}
	e.c = cluster.Start(t, cluster.Options{Nodes: nodes, Client: e.cp.Client, DualStack: dualStack, UnderlayIPv6: dualStack,
		StartAgent: func(t testenv.T, n *cluster.Node) {
			e.agents[n.Name] = nodeagent.Start(t, n, nodeagent.Options{Bins: nb, ControlPlane: e.cp,
				Enabled: enabled,
				Config:  map[string]map[string]any{"service": {"serviceCIDRs": cidrs}}})
		}})
	if p == proxyKube {
		e.startKubeProxies(t)
		return e
	}
	for _, n := range e.c.Nodes {
		e.waitSynced(t, n)
	}
	return e
}

// plugin returns the agent's view of one plugin on n.
func (e *env) plugin(t testenv.T, n *cluster.Node, name string) (state string, pid, restarts int) {
	t.Helper()
	code, body, err := e.agents[n.Name].Get("/v1/plugins")
	if err != nil || code != 200 {
		t.Fatalf("%s: GET /v1/plugins: %d %v %s", n.Name, code, err, body)
	}
	var ps []struct {
		Name     string `json:"name"`
		State    string `json:"state"`
		PID      int    `json:"pid"`
		Restarts int    `json:"restarts"`
	}
	if err := json.Unmarshal([]byte(body), &ps); err != nil {
		t.Fatalf("%s: /v1/plugins: %v", n.Name, err)
	}
	for _, p := range ps {
		if p.Name == name {
			return p.State, p.PID, p.Restarts
		}
	}
	return "not listed", 0, 0
}

func (e *env) waitSynced(t testenv.T, n *cluster.Node) { e.waitSyncedFor(t, n, time.Minute) }

func (e *env) waitSyncedFor(t testenv.T, n *cluster.Node, d time.Duration) {
	t.Helper()
	err := testenv.Eventually("service synced on "+n.Name, d, 50*time.Millisecond, func() error {
		if s, _, _ := e.plugin(t, n, "service"); s != "synced" {
			return fmt.Errorf("service is %s", s)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, e.agents[n.Name].Process.Tail(60))
	}
}

// killPlugin kill -9s the service plugin on n and waits for its successor.
func (e *env) killPlugin(t testenv.T, n *cluster.Node) {
	t.Helper()
	state, pid, _ := e.plugin(t, n, "service")
	if pid <= 0 || state != "synced" {
		t.Fatalf("%s: service is %s with pid %d", n.Name, state, pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("%s: kill -9 %d: %v", n.Name, pid, err)
	}
	err := testenv.Eventually(n.Name+": a new service process", 20*time.Second, 50*time.Millisecond, func() error {
		if _, p, _ := e.plugin(t, n, "service"); p == pid || p == 0 {
			return fmt.Errorf("still pid %d", p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
}

// backend adds a pod on n serving the echo and whoami ports.
func (e *env) backend(t testenv.T, name string, n *cluster.Node) *cluster.Pod {
	t.Helper()
	p := e.c.AddPod(t, cluster.PodSpec{Name: name, Namespace: ns, Node: n, Labels: map[string]string{"app": "backend"}})
	probe.Serve(t, p.NetNS, echoPort)
	whoami(t, p.NetNS, name)
	longEcho(t, p.NetNS)
	return p
}

// client adds a pod on n that only dials.
func (e *env) client(t testenv.T, name string, n *cluster.Node) *cluster.Pod {
	t.Helper()
	return e.c.AddPod(t, cluster.PodSpec{Name: name, Namespace: ns, Node: n})
}

// svcPort is one port of a test Service: Service port → target port.
type svcPort struct {
	name   string
	proto  corev1.Protocol
	port   int32
	target int32
}

// echoPorts: TCP, UDP and SCTP on port 80 to the echo servers, and TCP
// and UDP on port 90 to whoami.
var echoPorts = []svcPort{
	{"tcp", corev1.ProtocolTCP, 80, echoPort},
	{"udp", corev1.ProtocolUDP, 80, echoPort},
	{"sctp", corev1.ProtocolSCTP, 80, echoPort},
	{"who", corev1.ProtocolTCP, 90, whoamiPort},
	{"who-udp", corev1.ProtocolUDP, 90, whoamiPort},
	{"long", corev1.ProtocolTCP, 70, longPort},
}

// service creates a ClusterIP Service and returns its ClusterIP.
func (e *env) service(t testenv.T, name string, ports []svcPort) net.IP {
	t.Helper()
	return net.ParseIP(e.createService(t, name, ports, nil).Spec.ClusterIP)
}

// createService creates a Service (ClusterIP unless edit changes it).
func (e *env) createService(t testenv.T, name string, ports []svcPort, edit func(*corev1.Service)) *corev1.Service {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": "backend"}}}
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: p.name, Protocol: p.proto, Port: p.port, TargetPort: intstr.FromString(p.name)})
	}
	if edit != nil {
		edit(s)
	}
	got, err := e.cp.Client.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Service %s: %v", name, err)
	}
	t.Cleanup(func() {
		e.cp.Client.CoreV1().Services(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return got
}

// endpoints writes the Service's EndpointSlice as the EndpointSlice
// controller would for these ready pods (named target ports resolved to
// the numbers the pods serve).
func (e *env) endpoints(t testenv.T, svc string, ports []svcPort, pods ...*cluster.Pod) {
	t.Helper()
	e.endpointsOf(t, svc, discoveryv1.AddressTypeIPv4, ports, pods...)
}

// endpoints6 writes the Service's IPv6 EndpointSlice (the pods' IPv6
// addresses), beside the IPv4 one endpoints writes.
func (e *env) endpoints6(t testenv.T, svc string, ports []svcPort, pods ...*cluster.Pod) {
	t.Helper()
	e.endpointsOf(t, svc, discoveryv1.AddressTypeIPv6, ports, pods...)
}

func (e *env) endpointsOf(t testenv.T, svc string, family discoveryv1.AddressType, ports []svcPort, pods ...*cluster.Pod) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := svc + "-1"
	if family == discoveryv1.AddressTypeIPv6 {
		name = svc + "-v6"
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: family,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for _, p := range ports {
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptr(p.name), Protocol: ptr(p.proto), Port: ptr(p.target)})
	}
	for _, p := range pods {
		addr := p.IP()
		if family == discoveryv1.AddressTypeIPv6 {
			addr = ip6Of(t, p)
		}
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}, NodeName: ptr(p.Node.Name),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: p.Name}})
	}
	cl := e.cp.Client.DiscoveryV1().EndpointSlices(ns)
	old, err := cl.Get(ctx, es.Name, metav1.GetOptions{})
	if err == nil {
		es.ResourceVersion = old.ResourceVersion
		_, err = cl.Update(ctx, es, metav1.UpdateOptions{})
	} else {
		_, err = cl.Create(ctx, es, metav1.CreateOptions{})
		t.Cleanup(func() { cl.Delete(context.Background(), es.Name, metav1.DeleteOptions{}) })
	}
	if err != nil {
		t.Fatalf("writing EndpointSlice of %s: %v", svc, err)
	}
}

func ptr[T any](v T) *T { return &v }

// ip6Of is the pod's IPv6 address.
func ip6Of(t testenv.T, p *cluster.Pod) net.IP {
	t.Helper()
	for _, ip := range p.IPs {
		if ip.To4() == nil {
			return ip
		}
	}
	t.Fatalf("pod %s has no IPv6 address (%v)", p.Key(), p.IPs)
	return nil
}

// whoami serves, on whoamiPort in ns, each TCP client and each UDP
// datagram the pod's name and the source address it saw.
func whoami(t testenv.T, podNS, name string) {
	t.Helper()
	l, err := netns.Listen(podNS, "tcp", fmt.Sprintf(":%d", whoamiPort))
	if err != nil {
		t.Fatalf("%v", err)
	}
	pc, err := netns.ListenPacket(podNS, "udp", fmt.Sprintf(":%d", whoamiPort))
	if err != nil {
		t.Fatalf("%v", err)
	}
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			fmt.Fprintf(c, "%s %s\n", name, host)
			c.Close()
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(from.String())
			pc.WriteTo([]byte(name+" "+host+"\n"), from)
		}
	}()
	t.Cleanup(func() { l.Close(); pc.Close(); <-done; <-done })
}

// who asks ip:port over network (tcp or udp) from namespace from which
// backend answers, and the source address that backend saw.
func who(from, network string, ip net.IP, port int) (backend, seenAs string, err error) {
	c, err := netns.Dial(from, network, net.JoinHostPort(ip.String(), fmt.Sprint(port)), 3*time.Second)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if network == "udp" {
		if _, err := c.Write([]byte("who\n")); err != nil {
			return "", "", err
		}
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		return "", "", err
	}
	f := strings.Fields(string(buf[:n]))
	if len(f) != 2 {
		return "", "", fmt.Errorf("whoami answered %q", buf[:n])
	}
	return f[0], f[1], nil
}

// longEcho echoes TCP on longPort in ns for as long as the client likes.
func longEcho(t testenv.T, podNS string) {
	t.Helper()
	l, err := netns.Listen(podNS, "tcp", fmt.Sprintf(":%d", longPort))
	if err != nil {
		t.Fatalf("%v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(c, c); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}
