package realnode_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	np "switchyard.dev/switchyard/itest/netpolmodel"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/realnode"
	"switchyard.dev/switchyard/itest/testenv"
)

// realizeWait bounds how long a truth table may take to hold after a
// change: the controller (a pod here) sees the policy, streams it to the
// agents over TLS, netpol installs the flows.
const realizeWait = 30 * time.Second

// modelCheck is one truth table to hold on real pods.
type modelCheck struct {
	proto probe.Protocol
	port  int
	want  func(m *realnode.Model) *np.Reachability
}

// modelScenario applies NetworkPolicies (and Switchyard
// ClusterNetworkPolicies) and checks truth tables.
type modelScenario struct {
	name     string
	policies func(m *realnode.Model) []*networkingv1.NetworkPolicy
	cluster  map[string]crdv1.PolicySpec
	checks   []modelCheck
}

// all is the table with every pair set to ok; the setters below change
// it as the scenarios need ("ns/pod", "ns/*", "*/pod" or "*").
func all(ok bool) *np.Reachability { return np.NewReachability(np.ModelNames(), ok) }

func allowed(*realnode.Model) *np.Reachability { return all(true) }

// into denies everything into to, except from the (from, to) pairs in
// allow.
func into(to string, allow ...string) func(*realnode.Model) *np.Reachability {
	return func(*realnode.Model) *np.Reachability {
		r := all(true).Set("*", to, false)
		for i := 0; i+1 < len(allow); i += 2 {
			r.Set(allow[i], allow[i+1], true)
		}
		return r
	}
}

// from denies everything out of from, except the (from, to) pairs in
// allow.
func from(f string, allow ...string) func(*realnode.Model) *np.Reachability {
	return func(*realnode.Model) *np.Reachability {
		r := all(true).Set(f, "*", false)
		for i := 0; i+1 < len(allow); i += 2 {
			r.Set(allow[i], allow[i+1], true)
		}
		return r
	}
}

func policies(ps ...*networkingv1.NetworkPolicy) func(*realnode.Model) []*networkingv1.NetworkPolicy {
	return func(*realnode.Model) []*networkingv1.NetworkPolicy { return ps }
}

// The pods are spread round-robin over two nodes, so each table mixes
// same-node pairs (br-int on one node) and cross-node pairs (the Geneve
// tunnel; ingress enforced on the destination's node, egress on the
// source's). SCTP is left out: see realnode.Model.
var modelScenarios = []modelScenario{
	{name: "default-deny-ingress", policies: policies(np.Types(np.Policy("x", "deny", nil), true, false)),
		checks: []modelCheck{{probe.TCP, 80, into("x/*")}, {probe.UDP, 81, into("x/*")}}},
	{name: "ingress-from-namespace-selector", policies: policies(np.In(np.Policy("x", "a-from-y", np.Labels("pod", "a")),
		np.Peers(np.NSPeer(np.Labels("ns", "y"))))),
		checks: []modelCheck{{probe.TCP, 80, into("x/a", "y/*", "x/a")}}},
	{name: "ingress-from-pod-selector-in-another-namespace", policies: policies(np.In(np.Policy("x", "a-from-yc", np.Labels("pod", "a")),
		np.Peers(np.NSPodPeer(np.Labels("ns", "y"), np.Labels("pod", "c"))))),
		checks: []modelCheck{{probe.TCP, 80, into("x/a", "y/c", "x/a")}}},
	{name: "ingress-named-port-only", policies: policies(np.In(np.Policy("x", "named", np.Labels("pod", "a")), nil,
		np.Named(corev1.ProtocolTCP, "serve-80-tcp"))),
		checks: []modelCheck{{probe.TCP, 80, allowed}, {probe.TCP, 81, into("x/a")}}},
	{name: "default-deny-egress-allow-to-namespace", policies: policies(
		np.Types(np.Policy("x", "deny", nil), false, true),
		np.Out(np.Policy("x", "to-y", nil), np.Peers(np.NSPeer(np.Labels("ns", "y"))))),
		checks: []modelCheck{{probe.TCP, 80, from("x/*", "x/*", "y/*")}, {probe.UDP, 80, from("x/*", "x/*", "y/*")}}},
	{name: "ingress-ipblock-except", policies: func(m *realnode.Model) []*networkingv1.NetworkPolicy {
		return []*networkingv1.NetworkPolicy{np.In(np.Policy("x", "cidr", np.Labels("pod", "a")),
			np.Peers(np.IPPeer(realnode.ClusterCIDR, m.IP("y/b")+"/32")))}
	}, checks: []modelCheck{{probe.TCP, 80, func(*realnode.Model) *np.Reachability { return all(true).Set("y/b", "x/a", false) }}}},
	// A Switchyard tier above the Kubernetes policies: securityops drops y
	// into x/a although a NetworkPolicy lets everyone in.
	{name: "tier-drop-overrides-kubernetes-allow", policies: policies(np.In(np.Policy("x", "all-into-a", np.Labels("pod", "a")), nil)),
		cluster: map[string]crdv1.PolicySpec{"drop-y-to-xa": {Tier: "securityops", Priority: 1, AppliedTo: np.AppliedToPod("x", "a"),
			Ingress: []crdv1.Rule{{Name: "no-y", Action: crdv1.RuleActionDrop, From: []crdv1.Peer{{NamespaceSelector: np.Labels("ns", "y")}}}}}},
		checks: []modelCheck{{probe.TCP, 80, func(*realnode.Model) *np.Reachability { return all(true).Set("y/*", "x/a", false) }}}},
}

// TestNetworkPolicyModel runs the Kubernetes NetworkPolicy model on real
// pods: Switchyard installed from its images and switchyard.yml (the
// controller a Deployment, netpol a plugin of the agent DaemonSet), the
// model's nine pods started by kubelet and containerd on two nodes, and
// every pair probed the way the upstream e2e suite does, with agnhost
// connect exec'd in the source pod through the apiserver.
func TestNetworkPolicyModel(t *testing.T) {
	start := time.Now()
	c := realnode.Start(t, realnode.Options{Nodes: 2, Images: realnode.ProductImages(t)})
	c.Apply(t, realnode.Manifest(t))
	for _, n := range c.Nodes {
		if err := c.WaitNode(n.Name, realnode.Ready(true), 180*time.Second); err != nil {
			t.Fatalf("%v\nkube-system:\n%s", err, c.Describe("kube-system", 15))
		}
	}
	if err := c.WaitSystemReady("kube-system", 180*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, c.Describe("kube-system", 15))
	}
	m := c.StartModel(t)
	t.Logf("cluster, Switchyard and the model up in %s; placement: %s", time.Since(start).Round(time.Second), m.Placement())

	// Exec itself first, to the pod's own server on loopback, which no CNI
	// or policy is involved in: a failure here is the harness's (apiserver
	// to kubelet to containerd), not the network's, and says so plainly.
	err := testenv.Eventually("exec of agnhost connect 127.0.0.1:80 in x/a", 30*time.Second, 500*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r := c.Exec(ctx, "x", "a", "serve-80", "/agnhost", "connect", "127.0.0.1:80", "--timeout=2s")
		if r.Err != nil || r.ExitCode != 0 {
			return fmt.Errorf("exit %d, %v, stderr %q", r.ExitCode, r.Err, r.Stderr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	rounds := m.Check(t, "no policy", probe.TCP, 80, all(true), 60*time.Second)
	t.Logf("no policy, tcp/80: all 72 pairs ok (%d rounds, %s)", rounds, time.Since(t0).Round(time.Millisecond))
	for _, sc := range modelScenarios {
		t.Run(sc.name, func(t *testing.T) { runModelScenario(t, c, m, sc) })
	}
	// Each scenario removed its policies on the way out; the next one's
	// tables differ from its own, so a leftover would have failed it (its
	// checks retry only until realizeWait). After the last one nothing
	// follows: check that removing policies opens everything again.
	m.Check(t, "after every scenario: everything allowed again", probe.TCP, 80, all(true), realizeWait)
	t.Logf("total %s", time.Since(start).Round(time.Second))
}

func runModelScenario(t *testing.T, c *realnode.Cluster, m *realnode.Model, sc modelScenario) {
	// Whatever happens, the policies go before the next scenario. No
	// table checks that here (each costs seconds of exec): the next
	// scenario's own tables see any leftover.
	t.Cleanup(func() {
		np.DeletePolicies(t, c.CP.Client)
		if len(sc.cluster) > 0 {
			np.DeleteClusterPolicies(t, c.CP.Config)
		}
	})
	for _, p := range sc.policies(m) {
		np.ApplyPolicy(t, c.CP.Client, p)
	}
	for name, spec := range sc.cluster {
		np.ApplyClusterPolicy(t, c.CP.Config, name, spec)
	}
	for _, ck := range sc.checks {
		t0 := time.Now()
		rounds := m.Check(t, sc.name, ck.proto, ck.port, ck.want(m), realizeWait)
		want := ck.want(m)
		denied := 0
		for _, row := range want.Expected {
			for _, ok := range row {
				if !ok {
					denied++
				}
			}
		}
		t.Logf("%s/%d: table holds, %d of 72 pairs denied (%d rounds, %s)", ck.proto, ck.port, denied, rounds,
			time.Since(t0).Round(time.Millisecond))
	}
}
