package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/controller/app"
	"switchyard.dev/switchyard/controller/client"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/testenv"
)

const agentSA = "switchyard-agent"

type env struct {
	t    *testing.T
	cp   *controlplane.ControlPlane
	dyn  dynamic.Interface
	addr string
	// metricsAddr serves the controller's /metrics.
	metricsAddr string
	ctx         context.Context
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// installCRDs applies manifests/crds and waits until each is Established.
func installCRDs(t *testing.T, e *env) {
	dir, err := filepath.Abs("../../manifests/crds")
	must(t, "locating manifests/crds", err)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	must(t, "listing CRD manifests", err)
	if len(files) != 10 {
		t.Fatalf("want 10 CRD manifests (5 policy, NodeAgent, ControllerInfo, 2 egress, Traceflow) in %s, found %d: run go generate ./controller/apis/...", dir, len(files))
	}
	client, err := apiextclient.NewForConfig(e.cp.Config)
	must(t, "apiextensions client", err)
	for _, f := range files {
		fh, err := os.Open(f)
		must(t, "opening "+f, err)
		var crd apiextensionsv1.CustomResourceDefinition
		err = yaml.NewYAMLOrJSONDecoder(fh, 4096).Decode(&crd)
		fh.Close()
		must(t, "decoding "+f, err)
		_, err = client.ApiextensionsV1().CustomResourceDefinitions().Create(e.ctx, &crd, metav1.CreateOptions{})
		must(t, "creating CRD "+crd.Name, err)
		err = testenv.Eventually("CRD "+crd.Name+" Established", 30*time.Second, 50*time.Millisecond, func() error {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
			return errors.New("not established")
		})
		must(t, "waiting for CRD", err)
	}
}

// startController runs the controller in-process and stops it on cleanup.
func startController(t *testing.T, e *env) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, "listening", err)
	e.addr = l.Addr().String()
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, "listening for metrics", err)
	e.metricsAddr = ml.Addr().String()
	runController(t, app.Config{Kube: e.cp.Config, Listener: l, AllowedServiceAccounts: []string{"kube-system/" + agentSA}, LogSize: 1024,
		MetricsListener: ml})
}

// runController runs the controller in-process with cfg and stops it on
// cleanup, failing the test if it exits with an error or does not stop.
func runController(t *testing.T, cfg app.Config) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("controller exited with: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("controller did not stop within 30s")
		}
	})
}

// use makes the helpers report to t (a subtest) until the returned func runs.
func (e *env) use(t *testing.T) func() {
	old := e.t
	e.t = t
	return func() { e.t = old }
}

func (e *env) createNode(name string) {
	_, err := e.cp.Client.CoreV1().Nodes().Create(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(e.t, "creating node "+name, err)
}

func (e *env) createSA(ns, name string) {
	_, err := e.cp.Client.CoreV1().ServiceAccounts(ns).Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(e.t, "creating ServiceAccount "+ns+"/"+name, err)
}

// agentToken creates a host-network agent pod on node running as sa and
// returns a token bound to it, the way the agent DaemonSet gets one.
func (e *env) agentToken(sa, node string) string {
	name := "agent-" + sa + "-" + node
	pod, err := e.cp.Client.CoreV1().Pods("kube-system").Create(e.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa, HostNetwork: true,
			Containers: []corev1.Container{{Name: "agent", Image: "switchyard-agent"}}},
	}, metav1.CreateOptions{})
	must(e.t, "creating agent pod "+name, err)
	tr, err := e.cp.Client.CoreV1().ServiceAccounts("kube-system").CreateToken(e.ctx, sa, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	must(e.t, "requesting token for "+name, err)
	return tr.Status.Token
}

// createPod does kubelet's part too: it writes the pod IP into status.
func (e *env) createPod(ns, name, node, ip string, labels map[string]string, ports ...corev1.ContainerPort) {
	p, err := e.cp.Client.CoreV1().Pods(ns).Create(e.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "app", Ports: ports}}},
	}, metav1.CreateOptions{})
	must(e.t, "creating pod "+name, err)
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	_, err = e.cp.Client.CoreV1().Pods(ns).UpdateStatus(e.ctx, p, metav1.UpdateOptions{})
	must(e.t, "writing status of pod "+name, err)
}

func (e *env) relabel(ns, name string, labels map[string]string) {
	p, err := e.cp.Client.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
	must(e.t, "getting pod "+name, err)
	p.Labels = labels
	_, err = e.cp.Client.CoreV1().Pods(ns).Update(e.ctx, p, metav1.UpdateOptions{})
	must(e.t, "relabelling pod "+name, err)
}

func (e *env) createNative(gvr schema.GroupVersionResource, kind string, obj metav1.Object, spec crdv1.PolicySpec) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	must(e.t, "converting spec", err)
	o := &unstructured.Unstructured{Object: map[string]any{"spec": u}}
	o.SetAPIVersion(crdv1.SchemeGroupVersion.String())
	o.SetKind(kind)
	o.SetName(obj.GetName())
	o.SetNamespace(obj.GetNamespace())
	_, err = e.dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(e.ctx, o, metav1.CreateOptions{})
	must(e.t, "creating "+kind+" "+obj.GetName(), err)
}

func (e *env) cnpStatus(name string) (crdv1.PolicyStatus, int64) {
	u, err := e.dyn.Resource(crdv1.ClusterNetworkPoliciesResource).Get(e.ctx, name, metav1.GetOptions{})
	must(e.t, "getting ClusterNetworkPolicy "+name, err)
	var st crdv1.PolicyStatus
	if raw, ok := u.Object["status"].(map[string]any); ok {
		must(e.t, "decoding status", runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st))
	}
	return st, u.GetGeneration()
}

func want(v view, expected view) error {
	if diff := cmp.Diff(expected, v); diff != "" {
		return fmt.Errorf("view (-want +got):\n%s", diff)
	}
	return nil
}

func TestController(t *testing.T) {
	cp := controlplane.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dyn, err := dynamic.NewForConfig(cp.Config)
	must(t, "dynamic client", err)
	e := &env{t: t, cp: cp, dyn: dyn, ctx: ctx}

	installCRDs(t, e)
	for _, n := range []string{"n1", "n2", "n3"} {
		e.createNode(n)
	}
	e.createSA("kube-system", agentSA)
	e.createSA("kube-system", "intruder")
	tokens := map[string]string{}
	for _, n := range []string{"n1", "n2", "n3"} {
		tokens[n] = e.agentToken(agentSA, n)
	}
	_, err = cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{"team": "x"}}}, metav1.CreateOptions{})
	must(t, "creating namespace", err)
	http := corev1.ContainerPort{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}
	e.createPod("app", "server", "n1", "10.1.0.1", map[string]string{"app": "server"}, http)
	e.createPod("app", "client", "n2", "10.2.0.1", map[string]string{"app": "client"})
	e.createPod("app", "other", "n3", "10.3.0.1", map[string]string{"app": "other"})
	tcp := corev1.ProtocolTCP
	named := intstr.FromString("http")
	_, err = cp.Client.NetworkingV1().NetworkPolicies("app").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-client"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &named}},
			}},
		},
	}, metav1.CreateOptions{})
	must(t, "creating NetworkPolicy", err)

	startController(t, e)
	conn := dial(t, e.addr)
	nodes := map[string]*nodeClient{}
	for _, n := range []string{"n1", "n2", "n3"} {
		nodes[n] = newNodeClient(t, e.addr, n, tokens[n])
		nodes[n].start(t, false)
	}
	allowClient := []string{"INGRESS ALLOW to={app/server@n1[10.1.0.1]} peers={app/client@n2[10.2.0.1]} ports=[TCP/0-0http]"}

	t.Run("builtin tiers are created", func(t *testing.T) {
		defer e.use(t)()
		err := testenv.Eventually("six built-in tiers", 30*time.Second, 50*time.Millisecond, func() error {
			l, err := dyn.Resource(crdv1.TiersResource).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(l.Items) != 6 {
				return fmt.Errorf("%d tiers", len(l.Items))
			}
			return nil
		})
		must(t, "tiers", err)
	})

	t.Run("each node receives its span only", func(t *testing.T) {
		defer e.use(t)()
		nodes["n1"].waitView(t, "the allow-client policy", func(v view) error {
			return want(v, view{"k8s:app/allow-client": allowClient})
		})
		// n2 hosts the client, but no policy applies to its pods.
		nodes["n2"].waitView(t, "nothing", func(v view) error { return want(v, view{}) })
		nodes["n3"].waitView(t, "nothing", func(v view) error { return want(v, view{}) })
	})

	// A sentinel policy applied to every pod reaches all three nodes; events
	// a node got before it are the only ones a change could have caused,
	// which proves "nothing else arrived" without waiting for a timeout.
	sentinel := func(name string) {
		_, err := cp.Client.NetworkingV1().NetworkPolicies("app").Create(ctx, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
		}, metav1.CreateOptions{})
		must(t, "creating sentinel "+name, err)
	}
	untilSentinel := func(t *testing.T, c *nodeClient, name string) []string {
		t.Helper()
		var before []string
		c.waitEvents(t, "sentinel "+name, func(evs []string) error {
			i := slices.Index(evs, "policy+ k8s:app/"+name)
			if i < 0 {
				return fmt.Errorf("events so far: %v", evs)
			}
			before = nil
			for _, ev := range evs[:i] {
				if !strings.HasPrefix(ev, "atg+ ") {
					before = append(before, ev)
				}
			}
			return nil
		})
		return before
	}

	t.Run("pod label change yields only the patch, only in the span", func(t *testing.T) {
		defer e.use(t)()
		for _, c := range nodes {
			c.mark()
		}
		e.relabel("app", "other", map[string]string{"app": "client"})
		// Once n1 has the patch, the engine has finished the pod update, and
		// every event it caused for any node precedes the sentinel's.
		nodes["n1"].waitEvents(t, "the patch adding other", func(evs []string) error {
			if !slices.Contains(evs, "ag~ +app/other -") {
				return fmt.Errorf("events so far: %v", evs)
			}
			return nil
		})
		sentinel("sentinel-1")
		got := map[string][]string{}
		for n, c := range nodes {
			got[n] = untilSentinel(t, c, "sentinel-1")
		}
		wantEv := map[string][]string{"n1": {"ag~ +app/other -"}, "n2": nil, "n3": nil}
		if diff := cmp.Diff(wantEv, got); diff != "" {
			t.Fatalf("events before the sentinel (-want +got):\n%s", diff)
		}
	})

	t.Run("reconnect resumes from the last version", func(t *testing.T) {
		defer e.use(t)()
		c := nodes["n1"]
		c.stop()
		// Missed while away: the peer loses a member.
		// Grace 0: no kubelet runs to confirm a graceful deletion.
		must(t, "deleting pod", cp.Client.CoreV1().Pods("app").Delete(ctx, "client", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
		c.mark()
		c.start(t, true)
		c.waitView(t, "client gone from the peers", func(v view) error {
			return want(v, view{
				"k8s:app/allow-client": {"INGRESS ALLOW to={app/server@n1[10.1.0.1]} peers={app/other@n3[10.3.0.1]} ports=[TCP/0-0http]"},
				"k8s:app/sentinel-1":   {"isolate to={app/server@n1[10.1.0.1]}"},
			})
		})
		evs := c.eventsSinceMark()
		if len(evs) < 3 || evs[0] != "resumed" || evs[1] != "synced" || evs[2] != "ag~ + -app/client" {
			t.Fatalf("want resumed, synced, then the missed patch; got %v", evs)
		}
		// A version from another epoch cannot be resumed: fresh snapshot.
		c.stop()
		c.mu.Lock()
		c.last.Epoch = "bogus"
		c.mu.Unlock()
		c.mark()
		c.start(t, true)
		c.waitEvents(t, "a reset", func(evs []string) error {
			if len(evs) == 0 || evs[0] != "reset" {
				return fmt.Errorf("events %v", evs)
			}
			return nil
		})
	})

	t.Run("unauthenticated and other-node watches are refused", func(t *testing.T) {
		defer e.use(t)()
		ghostToken := func() string {
			// A pod on a node that has no Node object.
			return e.agentToken(agentSA, "ghost")
		}()
		tests := []struct {
			name, node, token string
			code              codes.Code
			msg               string
		}{
			{"no token", "n1", "", codes.Unauthenticated, "no bearer token"},
			{"garbage token", "n1", "not-a-token", codes.Unauthenticated, "unauthenticated"},
			{"admin token is not a ServiceAccount", "n1", cp.Config.BearerToken, codes.PermissionDenied, "is not a ServiceAccount"},
			{"other node", "n2", tokens["n1"], codes.PermissionDenied, `bound to node "n1" and may not act for node "n2"`},
			{"ServiceAccount not allowed", "n1", e.agentToken("intruder", "n1"), codes.PermissionDenied, "may not watch policies"},
			{"unregistered node", "ghost", ghostToken, codes.PermissionDenied, "not a registered Node"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
				defer ccancel()
				stream, err := apiv1.NewPolicyDistributionClient(conn).Watch(withToken(cctx, tc.token), &apiv1.WatchRequest{NodeName: tc.node})
				if err == nil {
					_, err = stream.Recv()
				}
				st, _ := status.FromError(err)
				if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
					t.Fatalf("got %v %q, want %v containing %q", st.Code(), st.Message(), tc.code, tc.msg)
				}
				_, err = apiv1.NewPolicyDistributionClient(conn).ReportRealization(withToken(cctx, tc.token), &apiv1.RealizationReport{NodeName: tc.node})
				if st, _ := status.FromError(err); st.Code() != tc.code {
					t.Fatalf("ReportRealization: got %v, want %v", st.Code(), tc.code)
				}
			})
		}
	})

	t.Run("invalid policies get a condition while the rest computes, and status shows realization", func(t *testing.T) {
		defer e.use(t)()
		// By now "other" (n3) carries app=client and "client" is gone.
		web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}
		drop := crdv1.Rule{Name: "no-other", Action: crdv1.RuleActionDrop, From: []crdv1.Peer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}}}
		e.createNative(crdv1.ClusterNetworkPoliciesResource, "ClusterNetworkPolicy", &metav1.ObjectMeta{Name: "bad-tier"},
			crdv1.PolicySpec{Tier: "nope", Priority: 1, AppliedTo: []crdv1.AppliedTo{{PodSelector: web}}, Ingress: []crdv1.Rule{drop}})
		e.createNative(crdv1.ClusterNetworkPoliciesResource, "ClusterNetworkPolicy", &metav1.ObjectMeta{Name: "bad-cidr"},
			crdv1.PolicySpec{Priority: 1, AppliedTo: []crdv1.AppliedTo{{PodSelector: web}},
				Ingress: []crdv1.Rule{{Action: crdv1.RuleActionAllow, From: []crdv1.Peer{{IPBlock: &crdv1.IPBlock{CIDR: "10.0.0.0/40"}}}}}})
		e.createNative(crdv1.ClusterNetworkPoliciesResource, "ClusterNetworkPolicy", &metav1.ObjectMeta{Name: "good"},
			crdv1.PolicySpec{Tier: "securityops", Priority: 5, AppliedTo: []crdv1.AppliedTo{{PodSelector: web}}, Ingress: []crdv1.Rule{drop}})

		for name, msg := range map[string]string{"bad-tier": `unknown tier "nope"`, "bad-cidr": `invalid CIDR "10.0.0.0/40"`} {
			err := testenv.Eventually("Valid=False on "+name, 30*time.Second, 50*time.Millisecond, func() error {
				st, gen := e.cnpStatus(name)
				for _, c := range st.Conditions {
					if c.Type == "Valid" && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, msg) && st.Phase == crdv1.PolicyFailed && st.ObservedGeneration == gen {
						return nil
					}
				}
				return fmt.Errorf("status %+v", st)
			})
			must(t, "invalid policy status", err)
		}
		n1 := nodes["n1"]
		n1.waitView(t, "the good native policy", func(v view) error {
			p := v["cnp:good"]
			if diff := cmp.Diff([]string{"INGRESS DROP to={app/server@n1[10.1.0.1]} peers={app/other@n3[10.3.0.1]} ports=[]"}, p); diff != "" {
				return fmt.Errorf("cnp:good (-want +got):\n%s", diff)
			}
			return nil
		})
		var pol *apiv1.Policy
		n1.c.View(func(s *client.State) { pol = s.Policies["cnp:good"] })
		if pol.TierPriority != 100 || pol.Priority != 5 {
			t.Errorf("tier priority %d priority %d, want 100 and 5", pol.TierPriority, pol.Priority)
		}
		waitStatus := func(what string, ok func(crdv1.PolicyStatus, int64) bool) {
			t.Helper()
			err := testenv.Eventually(what, 30*time.Second, 50*time.Millisecond, func() error {
				st, gen := e.cnpStatus("good")
				if ok(st, gen) {
					return nil
				}
				return fmt.Errorf("status %+v generation %d", st, gen)
			})
			must(t, "status of cnp good", err)
		}
		waitStatus("good: realizing on 0 of 1 nodes", func(st crdv1.PolicyStatus, gen int64) bool {
			return st.Phase == crdv1.PolicyRealizing && st.CurrentNodesRealized == 0 && st.DesiredNodesRealized == 1 && st.ObservedGeneration == gen
		})
		_, err := apiv1.NewPolicyDistributionClient(conn).ReportRealization(withToken(ctx, tokens["n1"]), &apiv1.RealizationReport{
			NodeName: "n1", Policies: []*apiv1.Realized{{Uid: "cnp:good", Generation: pol.Generation}}})
		must(t, "reporting realization", err)
		waitStatus("good: realized on 1 of 1 nodes", func(st crdv1.PolicyStatus, gen int64) bool {
			return st.Phase == crdv1.PolicyRealized && st.CurrentNodesRealized == 1 && st.DesiredNodesRealized == 1 && st.ObservedGeneration == gen
		})
	})

	t.Run("a missing tier appearing computes its waiting policy; group peers resolve", func(t *testing.T) {
		defer e.use(t)()
		tier := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"priority": int64(10)}}}
		tier.SetAPIVersion(crdv1.SchemeGroupVersion.String())
		tier.SetKind("Tier")
		tier.SetName("nope")
		_, err := dyn.Resource(crdv1.TiersResource).Create(ctx, tier, metav1.CreateOptions{})
		must(t, "creating tier nope", err)
		cg := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"podSelector": map[string]any{"matchLabels": map[string]any{"app": "client"}},
			"ipBlocks":    []any{map[string]any{"cidr": "192.0.2.0/24", "except": []any{"192.0.2.128/25"}}},
		}}}
		cg.SetAPIVersion(crdv1.SchemeGroupVersion.String())
		cg.SetKind("ClusterGroup")
		cg.SetName("clients")
		_, err = dyn.Resource(crdv1.ClusterGroupsResource).Create(ctx, cg, metav1.CreateOptions{})
		must(t, "creating ClusterGroup clients", err)
		e.createNative(crdv1.ClusterNetworkPoliciesResource, "ClusterNetworkPolicy", &metav1.ObjectMeta{Name: "via-group"},
			crdv1.PolicySpec{Tier: "emergency", Priority: 2, AppliedTo: []crdv1.AppliedTo{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}},
				Ingress: []crdv1.Rule{{Action: crdv1.RuleActionReject, From: []crdv1.Peer{{Group: "clients"}}}}})
		nodes["n1"].waitView(t, "bad-tier computed and via-group resolved", func(v view) error {
			got := view{"cnp:bad-tier": v["cnp:bad-tier"], "cnp:via-group": v["cnp:via-group"]}
			return want(got, view{
				"cnp:bad-tier":  {"INGRESS DROP to={app/server@n1[10.1.0.1]} peers={app/other@n3[10.3.0.1]} ports=[]"},
				"cnp:via-group": {"INGRESS REJECT to={app/server@n1[10.1.0.1]} peers={app/other@n3[10.3.0.1]} ports=[] block=192.0.2.0/24-[192.0.2.128/25]"},
			})
		})
		err = testenv.Eventually("bad-tier Valid=True", 30*time.Second, 50*time.Millisecond, func() error {
			st, _ := e.cnpStatus("bad-tier")
			for _, c := range st.Conditions {
				if c.Type == "Valid" && c.Status == metav1.ConditionTrue && st.Phase == crdv1.PolicyRealizing && st.DesiredNodesRealized == 1 {
					return nil
				}
			}
			return fmt.Errorf("status %+v", st)
		})
		must(t, "bad-tier status", err)

		broken := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"ipBlocks": []any{map[string]any{"cidr": "192.0.2.0/24", "except": []any{"10.0.0.0/8"}}}}}}
		broken.SetAPIVersion(crdv1.SchemeGroupVersion.String())
		broken.SetKind("ClusterGroup")
		broken.SetName("broken")
		_, err = dyn.Resource(crdv1.ClusterGroupsResource).Create(ctx, broken, metav1.CreateOptions{})
		must(t, "creating ClusterGroup broken", err)
		for name, wantStatus := range map[string]metav1.ConditionStatus{"clients": metav1.ConditionTrue, "broken": metav1.ConditionFalse} {
			err = testenv.Eventually("Valid="+string(wantStatus)+" on ClusterGroup "+name, 30*time.Second, 50*time.Millisecond, func() error {
				u, err := dyn.Resource(crdv1.ClusterGroupsResource).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
				for _, c := range conds {
					m := c.(map[string]any)
					if m["type"] == "Valid" && m["status"] == string(wantStatus) && (wantStatus == metav1.ConditionTrue || strings.Contains(m["message"].(string), "is not inside")) {
						return nil
					}
				}
				return fmt.Errorf("conditions %v", conds)
			})
			must(t, "group status", err)
		}
	})

	t.Run("ControllerInfo shows the connected nodes", func(t *testing.T) {
		defer e.use(t)()
		err := testenv.Eventually("ControllerInfo with 3 connected nodes", 30*time.Second, 200*time.Millisecond, func() error {
			u, err := dyn.Resource(crdv1.ControllerInfosResource).Get(ctx, app.ControllerInfoName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var ci crdv1.ControllerInfo
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ci); err != nil {
				return err
			}
			if ci.Status.ConnectedNodes != 3 || len(ci.Status.Nodes) != 3 || ci.Status.Heartbeat.IsZero() {
				return fmt.Errorf("status %+v", ci.Status)
			}
			for _, n := range ci.Status.Nodes {
				if n.Streams < 1 {
					return fmt.Errorf("node %+v", n)
				}
			}
			return nil
		})
		must(t, "ControllerInfo", err)
	})

	t.Run("metrics: computation, objects, node streams, refused TokenReviews", func(t *testing.T) {
		checkMetrics(t, e.metricsAddr, []string{"n1", "n2", "n3"})
	})
}
