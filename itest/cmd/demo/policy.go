package main

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"switchyard.dev/switchyard/controller/app"
	"switchyard.dev/switchyard/controller/client"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/manifests"
)

const agentSA = "switchyard-agent"

// startController installs the CRDs and runs switchyard-controller in this
// process, serving its distribution API on loopback.
func startController(t testenv.T, cp *controlplane.ControlPlane) string {
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatalf("%v", err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	files, _ := fs.Glob(manifests.Files, "crds/*.yaml")
	for _, f := range files {
		b, _ := fs.ReadFile(manifests.Files, f)
		var obj map[string]any
		if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096).Decode(&obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := dyn.Resource(crdGVR).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("installing %s: %v", f, err)
		}
	}
	// The controller needs its resources served, which happens only once
	// the apiserver has established the CRDs.
	tiers := schema.GroupVersionResource{Group: "crd.switchyard.dev", Version: "v1beta1", Resource: "tiers"}
	if err := testenv.Eventually("the Switchyard CRDs to be served", 30*time.Second, 200*time.Millisecond, func() error {
		_, err := dyn.Resource(tiers).List(context.Background(), metav1.ListOptions{})
		return err
	}); err != nil {
		t.Fatalf("%v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	logPath := filepath.Join(testenv.Dir(t, "ctrl"), "switchyard-controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { logFile.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Config{Kube: cp.Config, Listener: l, AllowedServiceAccounts: []string{"kube-system/" + agentSA},
			Log: slog.New(slog.NewTextHandler(logFile, nil))})
	}()
	fmt.Printf("    switchyard-controller serving on %s (log: %s)\n", l.Addr(), logPath)
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	})
	// Fail fast, with the controller's own words, if it stops on its own.
	go func() {
		select {
		case err := <-done:
			if ctx.Err() == nil {
				t.Fatalf("switchyard-controller stopped: %v", err)
			}
			done <- err
		case <-ctx.Done():
		}
	}()
	_, err = cp.Client.CoreV1().ServiceAccounts("kube-system").Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agentSA}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) { // the agents' harness created it with their RBAC
		t.Fatalf("creating the agent ServiceAccount: %v", err)
	}
	return l.Addr().String()
}

// nodeToken creates the node's agent pod object (hostNetwork, as the
// DaemonSet's would be) and a token bound to it, which carries the node name.
func nodeToken(t testenv.T, cp *controlplane.ControlPlane, node string) string {
	ctx := context.Background()
	pod, err := cp.Client.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "switchyard-agent-" + node},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: agentSA, HostNetwork: true,
			Containers: []corev1.Container{{Name: "agent", Image: "switchyard/switchyard"}}},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) { // the running agent's own pod object
		pod, err = cp.Client.CoreV1().Pods("kube-system").Get(ctx, "switchyard-agent-"+node, metav1.GetOptions{})
	}
	if err != nil {
		t.Fatalf("creating the agent pod of %s: %v", node, err)
	}
	tr, err := cp.Client.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, agentSA, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s: %v", node, err)
	}
	return tr.Status.Token
}

// nodeView is what one node holds after its snapshot.
type nodeView struct {
	policies  []string
	appliedTo []string // this node's pods the policies apply to
	peers     []string // address-group members the node was sent
}

// watchSnapshot watches as the node, through the same client library an
// agent's netpol plugin uses, until the node's first complete span.
func watchSnapshot(addr, node, token string) (nodeView, error) {
	got := make(chan nodeView, 1)
	h := snapshotHandler(func(s *client.State) {
		atg, ag := map[string]bool{}, map[string]bool{}
		var v nodeView
		for _, p := range s.Policies {
			v.policies = append(v.policies, p.Namespace+"/"+p.Name)
		}
		for _, g := range s.AppliedToGroups {
			for _, m := range g.Members {
				atg[m.Name] = true
			}
		}
		for _, g := range s.AddressGroups {
			for _, m := range g.Members {
				ag[m.Name] = true
			}
		}
		v.appliedTo, v.peers = keys(atg), keys(ag)
		sort.Strings(v.policies)
		select {
		case got <- v:
		default:
		}
	})
	c, err := client.New(client.Config{Address: addr, NodeName: node, Handler: h,
		Token: func(context.Context) (string, error) { return token, nil },
		Log:   slog.New(slog.DiscardHandler)})
	if err != nil {
		return nodeView{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case v := <-got:
		return v, nil
	case <-ctx.Done():
		return nodeView{}, fmt.Errorf("the watch of %s gave no complete snapshot in 20 s", node)
	}
}

// snapshotHandler hands each complete span to its function and ignores
// incremental changes.
type snapshotHandler func(*client.State)

func (h snapshotHandler) Replace(s *client.State)            { h(s) }
func (h snapshotHandler) Apply(*client.State, client.Change) {}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// demoPolicies are two NetworkPolicies: one that applies to every "a" pod
// (so every node needs it), and one that applies to a-1 only (so only
// node-1 needs it).
func demoPolicies() []*networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(8080)
	return []*networkingv1.NetworkPolicy{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "a-from-b", Namespace: "demo"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
				}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "isolate-a-1", Namespace: "demo"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "a", "node": "node-1"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			},
		},
	}
}

// netpolConfig is netpol's section on every demo node: the controller
// runs in this process on loopback, without TLS.
func netpolConfig() map[string]map[string]any {
	return map[string]map[string]any{"netpol": {"plaintext": true}}
}

// showPolicies creates the demo policies, prints what the controller
// streams each node (only the policies whose applied-to pods it hosts, only
// its own pods as their targets), and the pod connectivity on TCP 8080
// before and after netpol enforces them. It reports whether connectivity
// became what the policies say.
func showPolicies(t testenv.T, cp *controlplane.ControlPlane, c *cluster.Cluster, addr string, pods []*cluster.Pod) bool {
	var podEps, srcEps []probe.Endpoint
	nodeOf := map[string]string{}
	app := map[string]string{}
	for _, p := range pods {
		ep := probe.Endpoint{Name: p.Name, NetNS: p.NetNS, IP: p.IP()}
		podEps, srcEps = append(podEps, ep), append(srcEps, ep)
		nodeOf[p.Name], app[p.Name] = p.Node.Name, strings.SplitN(p.Name, "-", 2)[0]
	}
	for _, n := range c.Nodes {
		srcEps = append(srcEps, probe.Endpoint{Name: n.Name, NetNS: n.NetNS, IP: n.UnderlayIP})
		nodeOf[n.Name] = n.Name
	}
	opts := probe.MatrixOptions{SkipSelf: true, Timeout: time.Second}
	before := probe.Run(srcEps, podEps, probe.TCP, 8080, opts)
	fmt.Printf("\npod connectivity on TCP 8080 BEFORE any NetworkPolicy (rows: from, columns: to):\n%s\n", before)

	for _, np := range demoPolicies() {
		if _, err := cp.Client.NetworkingV1().NetworkPolicies(np.Namespace).Create(context.Background(), np, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating NetworkPolicy %s/%s: %v", np.Namespace, np.Name, err)
		}
	}
	fmt.Printf("NetworkPolicies: demo/a-from-b (app=a, ingress from app=b on TCP 8080), demo/isolate-a-1 (a-1 only)\n")
	fmt.Printf("what switchyard-controller streams to each node (its span):\n")
	fmt.Printf("%-8s %-34s %-14s %s\n", "NODE", "POLICIES", "APPLIED TO", "PEERS")
	for _, n := range c.Nodes {
		token := nodeToken(t, cp, n.Name)
		var v nodeView
		err := testenv.Eventually("the controller to stream "+n.Name+" both of its policies", 30*time.Second, 200*time.Millisecond, func() error {
			var err error
			v, err = watchSnapshot(addr, n.Name, token)
			if err != nil {
				return err
			}
			want := 1
			if n.Index == 1 {
				want = 2
			}
			if len(v.policies) != want {
				return fmt.Errorf("%s holds %d policies, want %d", n.Name, len(v.policies), want)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v", err)
		}
		fmt.Printf("%-8s %-34s %-14s %s\n", n.Name, strings.Join(v.policies, ","), strings.Join(v.appliedTo, ","), strings.Join(v.peers, ","))
	}

	// The a pods take TCP 8080 only from b pods, and from their own node
	// (kubelet's probes); the b pods stay open.
	expect := probe.Expect(srcEps, podEps, true, true)
	for f := range expect {
		for d := range expect[f] {
			if app[d] == "a" {
				expect[f][d] = app[f] == "b" || f == nodeOf[d]
			}
		}
	}
	start := time.Now()
	var after *probe.Matrix
	err := testenv.Eventually("netpol to enforce the demo policies on every node", 30*time.Second, 100*time.Millisecond, func() error {
		after = probe.Run(srcEps, podEps, probe.TCP, 8080, opts)
		if d := after.Diff(expect); d != "" {
			return fmt.Errorf("%s", d)
		}
		return nil
	})
	fmt.Printf("\npod connectivity on TCP 8080 AFTER, enforced by netpol in OVS (%s after the create):\n%s\n", time.Since(start).Round(10*time.Millisecond), after)
	if err != nil {
		fmt.Printf("UNEXPECTED (got!want):\n%s\n", after.Diff(expect))
		return false
	}
	fmt.Println("a-* pods now take TCP 8080 only from b-* pods and from their own node; egress is enforced at the source node, ingress at the destination.")
	return true
}
