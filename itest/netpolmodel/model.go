package netpolmodel

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"switchyard.dev/switchyard/itest/build"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

// The model.
var (
	Namespaces = []string{"x", "y", "z"}
	PodNames   = []string{"a", "b", "c"}
	Ports      = []int{80, 81}
	Protocols  = []probe.Protocol{probe.TCP, probe.UDP, probe.SCTP}
)

// Options configures Start.
type Options struct {
	// Nodes is how many nodes the cluster has (default 1).
	Nodes int
	// Place returns the index (0-based) of the node pod namespace/name runs
	// on; default: spread round-robin over the nodes.
	Place func(ns, pod string) int
	// ProbeTimeout bounds one probe (default 700 ms): an expected deny
	// costs this much, so keep it short.
	ProbeTimeout time.Duration
	// NetpolConfig adds keys to netpol's config section.
	NetpolConfig map[string]any
	// Service also runs the service plugin on every node, so policies can
	// be checked on traffic to a ClusterIP (ServiceClusterIP creates one).
	Service bool
}

// Env is a running model.
type Env struct {
	CP      *controlplane.ControlPlane
	Ctrl    *Controller
	Cluster *cluster.Cluster
	// Agents by node name.
	Agents map[string]*nodeagent.Agent
	Bins   nodeagent.Binaries
	// Pods by "ns/name", in model order in Names.
	Pods  map[string]*cluster.Pod
	Names []string

	opts Options
	t    testenv.T
}

// Start brings up the control plane, the controller, the nodes with
// podnet and netpol, and the model's namespaces and pods with their
// servers.
func Start(t testenv.T, o Options) *Env {
	t.Helper()
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 700 * time.Millisecond
	}
	if o.Place == nil {
		i := 0
		order := map[string]int{}
		for _, ns := range Namespaces {
			for _, p := range PodNames {
				order[ns+"/"+p] = i
				i++
			}
		}
		n := o.Nodes
		o.Place = func(ns, pod string) int { return order[ns+"/"+pod] % n }
	}
	e := &Env{opts: o, t: t, Pods: map[string]*cluster.Pod{}, Agents: map[string]*nodeagent.Agent{}}
	e.CP = controlplane.Start(t)
	pkgs := []string{"host/cmd/switchyard-agent", "cni/cmd/switchyard-cni", "plugins/podnet", "plugins/tunnel", "plugins/netpol"}
	enabled := []string{"podnet", "tunnel", "netpol"}
	if o.Service {
		pkgs, enabled = append(pkgs, "plugins/service"), append(enabled, "service")
	}
	bins := build.Commands(t, pkgs...)
	e.Bins = nodeagent.Binaries{Agent: bins["switchyard-agent"], CNI: bins["switchyard-cni"], Plugins: map[string]string{}}
	for _, name := range enabled {
		e.Bins.Plugins[name] = bins[name]
	}
	e.Ctrl = StartController(t, e.CP)
	npCfg := map[string]any{"plaintext": true}
	maps.Copy(npCfg, o.NetpolConfig)
	cfg := map[string]map[string]any{"netpol": npCfg}
	if o.Service {
		cfg["service"] = map[string]any{"serviceCIDRs": []string{controlplane.ServiceCIDR}}
	}
	e.Cluster = cluster.Start(t, cluster.Options{Nodes: o.Nodes, Client: e.CP.Client, StartAgent: func(t testenv.T, n *cluster.Node) {
		e.Agents[n.Name] = nodeagent.Start(t, n, nodeagent.Options{Bins: e.Bins, ControlPlane: e.CP, Controller: e.Ctrl.Addr,
			Enabled: enabled, Config: cfg})
	}})
	for _, ns := range Namespaces {
		e.createNamespace(ns)
	}
	for _, ns := range Namespaces {
		for _, name := range PodNames {
			e.AddPod(ns, name)
		}
	}
	return e
}

func (e *Env) createNamespace(ns string) {
	_, err := e.CP.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"ns": ns}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatalf("creating namespace %s: %v", ns, err)
	}
}

// ContainerPorts are a model pod's named ports: serve-<port>-<proto>.
func ContainerPorts() []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, port := range Ports {
		for _, proto := range Protocols {
			out = append(out, corev1.ContainerPort{Name: fmt.Sprintf("serve-%d-%s", port, proto),
				ContainerPort: int32(port), Protocol: corev1.Protocol(strings.ToUpper(string(proto)))})
		}
	}
	return out
}

// AddPod starts a model pod ns/name (labels pod=<name>) with its servers,
// on the node Options.Place picks.
func (e *Env) AddPod(ns, name string) *cluster.Pod {
	e.t.Helper()
	node := e.Cluster.Nodes[e.opts.Place(ns, name)%len(e.Cluster.Nodes)]
	p := e.Cluster.AddPod(e.t, cluster.PodSpec{Name: name, Namespace: ns, Node: node,
		Labels: map[string]string{"pod": name}, Ports: ContainerPorts()})
	for _, port := range Ports {
		probe.Serve(e.t, p.NetNS, port)
	}
	key := ns + "/" + name
	if _, ok := e.Pods[key]; !ok {
		e.Names = append(e.Names, key)
	}
	e.Pods[key] = p
	return p
}

// DeletePod removes a model pod.
func (e *Env) DeletePod(ns, name string) {
	e.t.Helper()
	key := ns + "/" + name
	if p := e.Pods[key]; p != nil {
		e.Cluster.DeletePod(e.t, p)
		delete(e.Pods, key)
		e.Names = slices.DeleteFunc(e.Names, func(s string) bool { return s == key })
	}
}

// Endpoints are the pods as probe endpoints, in model order.
func (e *Env) Endpoints() []probe.Endpoint {
	var out []probe.Endpoint
	for _, k := range e.Names {
		p := e.Pods[k]
		out = append(out, probe.Endpoint{Name: k, NetNS: p.NetNS, IP: p.IP()})
	}
	return out
}

// Probe checks one pair once.
func (e *Env) Probe(from, to string, proto probe.Protocol, port int) error {
	f, d := e.Pods[from], e.Pods[to]
	if f == nil || d == nil {
		return fmt.Errorf("no model pod %s or %s", from, to)
	}
	return probe.Check(f.NetNS, proto, d.IP(), port, e.opts.ProbeTimeout)
}

// Reachability is a truth table over the model's pods: Expected[from][to].
// Probes from a pod to itself never leave the pod, so they are left out.
type Reachability struct {
	Names    []string
	Expected map[string]map[string]bool
}

// NewReachability returns a table over the env's pods with every pair set
// to def.
func (e *Env) NewReachability(def bool) *Reachability { return NewReachability(e.Names, def) }

// NewReachability returns a table over names ("ns/pod") with every pair
// set to def; any harness that runs the model's pods can use it.
func NewReachability(names []string, def bool) *Reachability {
	r := &Reachability{Names: slices.Clone(names), Expected: map[string]map[string]bool{}}
	for _, f := range names {
		r.Expected[f] = map[string]bool{}
		for _, d := range names {
			if f != d {
				r.Expected[f][d] = def
			}
		}
	}
	return r
}

// ModelNames are the model's pods, "ns/pod", in model order (x/a, x/b,
// ..., z/c).
func ModelNames() []string {
	var out []string
	for _, ns := range Namespaces {
		for _, p := range PodNames {
			out = append(out, ns+"/"+p)
		}
	}
	return out
}

// Set sets every pair whose source matches from and destination matches to
// (each "ns/name", "ns/*", "*/name" or "*").
func (r *Reachability) Set(from, to string, ok bool) *Reachability {
	for f, row := range r.Expected {
		for d := range row {
			if match(from, f) && match(to, d) {
				row[d] = ok
			}
		}
	}
	return r
}

func match(pat, name string) bool {
	if pat == "*" || pat == name {
		return true
	}
	pns, ppod, _ := strings.Cut(pat, "/")
	ns, pod, _ := strings.Cut(name, "/")
	return (pns == "*" || pns == ns) && (ppod == "*" || ppod == pod)
}

// String renders the table as the probe matrix does.
func (r *Reachability) String(proto probe.Protocol, port int) string {
	m := &probe.Matrix{Proto: proto, Port: port, From: r.Names, To: r.Names, Reachable: r.Expected}
	return m.String()
}

// Check probes the matrix for proto/port until it equals want or wait
// runs out (realization takes a moment), and fails the test with both
// truth tables otherwise. It returns whether the tables agreed.
func (e *Env) Check(t testenv.T, what string, proto probe.Protocol, port int, want *Reachability, wait time.Duration) bool {
	t.Helper()
	eps := e.Endpoints()
	deadline := time.Now().Add(wait)
	for {
		m := probe.Run(eps, eps, proto, port, probe.MatrixOptions{SkipSelf: true, Timeout: e.opts.ProbeTimeout, Workers: 36})
		diff := m.Diff(want.Expected)
		if diff == "" {
			return true
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s/%d connectivity differs after %s\nexpected:\n%s\nactual (got!want):\n%s\n%s", what, proto, port, wait,
				want.String(proto, port), diff, e.agentLogs(20))
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// agentLogs is the last lines of every agent's log that are about netpol
// or are warnings and errors.
func (e *Env) agentLogs(lines int) string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(e.Agents)) {
		a := e.Agents[n]
		var keep []string
		for _, l := range strings.Split(a.Log(), "\n") {
			if strings.Contains(l, "netpol") || strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
				keep = append(keep, l)
			}
		}
		keep = keep[max(0, len(keep)-lines):]
		fmt.Fprintf(&b, "--- agent log of %s (%s), netpol, warnings and errors:\n%s\n", n, a.Process.LogPath, strings.Join(keep, "\n"))
	}
	return b.String()
}

// Apply creates or updates a NetworkPolicy.
func (e *Env) Apply(t testenv.T, np *networkingv1.NetworkPolicy) {
	t.Helper()
	ApplyPolicy(t, e.CP.Client, np)
}

// ApplyPolicy creates or updates a NetworkPolicy through client.
func ApplyPolicy(t testenv.T, client kubernetes.Interface, np *networkingv1.NetworkPolicy) {
	t.Helper()
	ctx := context.Background()
	c := client.NetworkingV1().NetworkPolicies(np.Namespace)
	cur, err := c.Get(ctx, np.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.Create(ctx, np, metav1.CreateOptions{})
	case err == nil:
		np = np.DeepCopy()
		np.ResourceVersion = cur.ResourceVersion
		_, err = c.Update(ctx, np, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("applying NetworkPolicy %s/%s: %v", np.Namespace, np.Name, err)
	}
}

// DeleteAllPolicies removes every NetworkPolicy of the model's namespaces.
func (e *Env) DeleteAllPolicies(t testenv.T) {
	t.Helper()
	DeletePolicies(t, e.CP.Client)
}

// DeletePolicies removes every NetworkPolicy of the model's namespaces
// through client.
func DeletePolicies(t testenv.T, client kubernetes.Interface) {
	t.Helper()
	for _, ns := range Namespaces {
		err := client.NetworkingV1().NetworkPolicies(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("deleting the policies of %s: %v", ns, err)
		}
	}
}

// LabelPod sets a pod's labels.
func (e *Env) LabelPod(t testenv.T, key string, labels map[string]string) {
	t.Helper()
	ns, name, _ := strings.Cut(key, "/")
	ctx := context.Background()
	p, err := e.CP.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		p.Labels = labels
		_, err = e.CP.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("labelling pod %s: %v", key, err)
	}
}

// LabelNamespace sets a namespace's labels.
func (e *Env) LabelNamespace(t testenv.T, ns string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	o, err := e.CP.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err == nil {
		o.Labels = labels
		_, err = e.CP.Client.CoreV1().Namespaces().Update(ctx, o, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("labelling namespace %s: %v", ns, err)
	}
}

// NodeOf returns the node a model pod runs on.
func (e *Env) NodeOf(key string) string {
	if p := e.Pods[key]; p != nil {
		return p.Node.Name
	}
	return ""
}

// Placement describes where the pods run, for logs.
func (e *Env) Placement() string {
	by := map[string][]string{}
	for _, k := range e.Names {
		by[e.NodeOf(k)] = append(by[e.NodeOf(k)], k)
	}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(by)) {
		sort.Strings(by[n])
		parts = append(parts, n+": "+strings.Join(by[n], " "))
	}
	return strings.Join(parts, "; ")
}
