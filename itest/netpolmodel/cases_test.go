package netpolmodel

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/plugins/netpol/feature"
)

func init() {
	cases = append(cases, []struct {
		name string
		run  func(t *testing.T, e *Env)
	}{
		{"node-reaches-its-own-pods-under-deny", nodeToOwnPods},
		{"established-connection-survives-update", establishedSurvives},
		{"native-higher-tier-drop-overrides-allow", tierDropOverridesAllow},
		{"native-pass-hands-over-to-kubernetes", passToKubernetes},
		{"native-reject-tcp-rst-and-icmp", rejectSeenByClient},
		{"native-logging-and-counters", loggingAndCounters},
		{"netpol-kill-9-no-gap", killNoGap},
		{"controller-down-and-back", controllerDown},
		{"flow-count-bound", flowCountBound},
		{"realization-status-n-of-m-nodes", realizationStatus},
	}...)
}

// cleanup removes every policy and waits until everything is allowed.
func cleanup(t *testing.T, e *Env) {
	e.DeleteAllPolicies(t)
	e.DeleteClusterPolicies(t)
	restore(t, e)
	e.Check(t, "after the case: everything allowed again", probe.TCP, 80, e.NewReachability(true), realizeWait)
}

func nodeToOwnPods(t *testing.T, e *Env) {
	defer cleanup(t, e)
	for _, ns := range Namespaces {
		e.Apply(t, Types(Policy(ns, "deny", nil), true, false))
	}
	e.Check(t, "every pod ingress-isolated", probe.TCP, 80, e.NewReachability(false), realizeWait)
	for _, k := range e.Names {
		p := e.Pods[k]
		if err := probe.Check(p.Node.NetNS, probe.TCP, p.IP(), 80, 2*time.Second); err != nil {
			t.Errorf("node %s cannot reach its own pod %s under default deny (kubelet probes need it): %v", p.Node.Name, k, err)
		}
	}
}

// echo sends a line on c and reads it back.
func echo(c net.Conn, timeout time.Duration) error {
	c.SetDeadline(time.Now().Add(timeout))
	msg := []byte("still there?\n")
	if _, err := c.Write(msg); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return err
}

func establishedSurvives(t *testing.T, e *Env) {
	defer cleanup(t, e)
	e.Apply(t, In(Policy("x", "est", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "y"))), Port(tcp, 80)))
	e.Check(t, "x/a from y only", probe.TCP, 80, denyInto("x/a", "y/*", "x/a")(e), realizeWait)
	c, err := netns.Dial(e.Pods["y/b"].NetNS, "tcp", net.JoinHostPort(e.Pods["x/a"].IP().String(), "80"), 2*time.Second)
	if err != nil {
		t.Fatalf("y/b -> x/a: %v", err)
	}
	defer c.Close()
	if err := echo(c, 2*time.Second); err != nil {
		t.Fatalf("echo on the new connection: %v", err)
	}
	e.Apply(t, In(Policy("x", "est", Labels("pod", "a")), Peers(NSPeer(Expr("ns", metav1.LabelSelectorOpIn, "y", "z"))), Port(tcp, 80)))
	e.Check(t, "x/a from y and z", probe.TCP, 80, denyInto("x/a", "y/*", "x/a", "z/*", "x/a")(e), realizeWait)
	if err := echo(c, 2*time.Second); err != nil {
		t.Fatalf("the established connection y/b -> x/a broke on an update that still allows it: %v", err)
	}
	e.Apply(t, In(Policy("x", "est", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "z"))), Port(tcp, 80)))
	e.Check(t, "x/a from z only", probe.TCP, 80, denyInto("x/a", "z/*", "x/a")(e), realizeWait)
	if err := echo(c, time.Second); err == nil {
		t.Fatalf("the connection y/b -> x/a still carries data after an update that denies it")
	}
}

func cnpTo(ns, pod string) []crdv1.AppliedTo { return AppliedToPod(ns, pod) }

func tierDropOverridesAllow(t *testing.T, e *Env) {
	defer cleanup(t, e)
	e.ApplyClusterPolicy(t, "allow-all-to-xa", crdv1.PolicySpec{Tier: "application", Priority: 1, AppliedTo: cnpTo("x", "a"),
		Ingress: []crdv1.Rule{{Name: "all", Action: crdv1.RuleActionAllow}}})
	e.ApplyClusterPolicy(t, "drop-y-to-xa", crdv1.PolicySpec{Tier: "securityops", Priority: 1, AppliedTo: cnpTo("x", "a"),
		Ingress: []crdv1.Rule{{Name: "no-y", Action: crdv1.RuleActionDrop, From: []crdv1.Peer{{NamespaceSelector: Labels("ns", "y")}}}}})
	e.Check(t, "securityops Drop over application Allow", probe.TCP, 80,
		e.NewReachability(true).Set("y/*", "x/a", false), realizeWait)
}

func passToKubernetes(t *testing.T, e *Env) {
	defer cleanup(t, e)
	e.Apply(t, In(Policy("x", "a-from-b", Labels("pod", "a")), Peers(PodPeer(Labels("pod", "b")))))
	e.ApplyClusterPolicy(t, "allow-all-to-xa", crdv1.PolicySpec{Tier: "application", Priority: 1, AppliedTo: cnpTo("x", "a"),
		Ingress: []crdv1.Rule{{Name: "all", Action: crdv1.RuleActionAllow}}})
	e.ApplyClusterPolicy(t, "pass-z", crdv1.PolicySpec{Tier: "securityops", Priority: 1, AppliedTo: cnpTo("x", "a"),
		Ingress: []crdv1.Rule{{Name: "z-to-k8s", Action: crdv1.RuleActionPass, From: []crdv1.Peer{{NamespaceSelector: Labels("ns", "z")}}}}})
	// z is passed to the Kubernetes policy (only x/b), skipping the
	// application tier's Allow that lets everyone else in.
	e.Check(t, "Pass skips to the Kubernetes policies", probe.TCP, 80,
		e.NewReachability(true).Set("z/*", "x/a", false), realizeWait)
}

func rejectSeenByClient(t *testing.T, e *Env) {
	defer cleanup(t, e)
	e.ApplyClusterPolicy(t, "reject-z", crdv1.PolicySpec{Tier: "securityops", Priority: 1, AppliedTo: cnpTo("x", "a"),
		Ingress: []crdv1.Rule{{Name: "z-rejected", Action: crdv1.RuleActionReject, From: []crdv1.Peer{{NamespaceSelector: Labels("ns", "z")}}}}})
	e.Check(t, "z rejected by x/a", probe.TCP, 80, e.NewReachability(true).Set("z/*", "x/a", false), realizeWait)
	dst := net.JoinHostPort(e.Pods["x/a"].IP().String(), "80")
	for _, from := range []string{"z/a", "z/b"} { // one on x/a's node, one on the other
		_, err := netns.Dial(e.Pods[from].NetNS, "tcp", dst, 3*time.Second)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("TCP %s -> x/a: want connection refused (an RST from the reject), got %v", from, err)
		}
		c, err := netns.Dial(e.Pods[from].NetNS, "udp", dst, 3*time.Second)
		if err != nil {
			t.Fatalf("%v", err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		c.Write([]byte("hello\n"))
		_, err = c.Read(make([]byte, 16))
		c.Close()
		if !errors.Is(err, syscall.EHOSTUNREACH) {
			t.Errorf("UDP %s -> x/a: want host unreachable (ICMP administratively prohibited), got %v", from, err)
		}
	}
}

func readDecisions(path string) []feature.Decision {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []feature.Decision
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var d feature.Decision
		if json.Unmarshal(sc.Bytes(), &d) == nil {
			out = append(out, d)
		}
	}
	return out
}

func loggingAndCounters(t *testing.T, e *Env) {
	defer cleanup(t, e)
	e.ApplyClusterPolicy(t, "log-y", crdv1.PolicySpec{Tier: "securityops", Priority: 2, AppliedTo: cnpTo("x", "a"),
		Ingress: []crdv1.Rule{{Name: "y-logged", Action: crdv1.RuleActionAllow, EnableLogging: true,
			From: []crdv1.Peer{{NamespaceSelector: Labels("ns", "y"), PodSelector: Labels("pod", "b")}}}}})
	node := e.NodeOf("x/a")
	dir := e.NetpolDir(node)
	before := len(readDecisions(filepath.Join(dir, "decisions.log")))
	// The rule allows what is allowed anyway: probe until its flows are in.
	const probes = 5
	var err error
	for i := 0; i < probes; i++ {
		err = e.Probe("y/b", "x/a", probe.TCP, 80)
	}
	if err != nil {
		t.Fatalf("y/b -> x/a: %v", err)
	}
	src, dst := e.Pods["y/b"].IP().String(), e.Pods["x/a"].IP().String()
	var ds []feature.Decision
	werr := waitFor("a decision line for y/b -> x/a:80 in "+dir, 15*time.Second, func() error {
		ds = readDecisions(filepath.Join(dir, "decisions.log"))[before:]
		for _, d := range ds {
			if d.Policy == "log-y" && d.Rule == "y-logged" && d.Direction == "ingress" && d.Action == "Allow" &&
				d.Src == src && d.Dst == dst && d.DstPort == 80 && d.Proto == 6 {
				return nil
			}
		}
		_ = e.Probe("y/b", "x/a", probe.TCP, 80)
		return fmt.Errorf("%d new lines, none matches: %+v", len(ds), ds)
	})
	if werr != nil {
		t.Fatalf("%v", werr)
	}
	// Counters: the rule's flows counted the probes (read back through the
	// SDK into counters.json).
	werr = waitFor("counters.json to count the logged rule", 15*time.Second, func() error {
		b, err := os.ReadFile(filepath.Join(dir, "counters.json"))
		if err != nil {
			return err
		}
		var cs []feature.RuleCounters
		if err := json.Unmarshal(b, &cs); err != nil {
			return err
		}
		for _, c := range cs {
			if c.Policy == "log-y" && c.Rule == "y-logged" {
				if c.Packets >= probes && c.Bytes > 0 {
					return nil
				}
				return fmt.Errorf("rule counters %+v, want at least %d packets", c, probes)
			}
		}
		return fmt.Errorf("no counters for log-y/y-logged in %s", b)
	})
	if werr != nil {
		t.Fatalf("%v", werr)
	}
}

func waitFor(what string, d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// prober probes pairs continuously and records every result that is not
// what is expected.
type prober struct {
	e      *Env
	pairs  map[[2]string]bool // from, to -> allowed
	mu     sync.Mutex
	n      int
	wrong  []string
	cancel context.CancelFunc
	done   chan struct{}
}

func startProber(e *Env, pairs map[[2]string]bool) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{e: e, pairs: pairs, cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for pair, ok := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				f, d := e.Pods[pair[0]], e.Pods[pair[1]]
				// An allowed probe gets time enough under load; a denied
				// one must not get through within the same time.
				err := probe.Check(f.NetNS, probe.TCP, d.IP(), 80, 2*time.Second)
				p.mu.Lock()
				p.n++
				if (err == nil) != ok {
					p.wrong = append(p.wrong, fmt.Sprintf("%s %s -> %s: allowed=%v, want %v (%v)",
						time.Now().Format("15:04:05.000"), pair[0], pair[1], err == nil, ok, err))
				}
				p.mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	go func() { wg.Wait(); close(p.done) }()
	return p
}

func (p *prober) stop() (int, []string) {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n, p.wrong
}

// gapPolicies isolate x/a (ingress from y only) and z/a (egress to x only),
// so both directions are enforced somewhere during a restart.
func gapPolicies(t *testing.T, e *Env) map[[2]string]bool {
	e.Apply(t, In(Policy("x", "a-from-y", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "y"))), Port(tcp, 80)))
	e.Apply(t, Out(Policy("z", "a-to-x", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "x")))))
	want := e.NewReachability(true).Set("*", "x/a", false).Set("y/*", "x/a", true).Set("z/a", "*", false).Set("z/a", "x/*", true).
		Set("z/a", "x/a", false)
	e.Check(t, "gap policies", probe.TCP, 80, want, realizeWait)
	return map[[2]string]bool{
		{"y/b", "x/a"}: true, {"y/c", "x/a"}: true, {"z/b", "x/a"}: false, {"x/b", "x/a"}: false,
		{"z/a", "x/b"}: true, {"z/a", "y/a"}: false, {"z/a", "y/b"}: false,
	}
}

func killNoGap(t *testing.T, e *Env) {
	defer cleanup(t, e)
	pairs := gapPolicies(t, e)
	p := startProber(e, pairs)
	time.Sleep(time.Second)
	for _, n := range e.Cluster.Nodes {
		e.KillPlugin(t, n.Name, "netpol")
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	n, wrong := p.stop()
	t.Logf("%d probes while netpol was killed and restarted on %d nodes", n, len(e.Cluster.Nodes))
	if len(wrong) > 0 {
		t.Fatalf("enforcement changed while netpol restarted:\n%s", strings.Join(wrong, "\n"))
	}
	if n < 20 {
		t.Fatalf("only %d probes ran", n)
	}
}

func controllerDown(t *testing.T, e *Env) {
	defer cleanup(t, e)
	pairs := gapPolicies(t, e)
	e.Ctrl.Stop()
	stopped := true
	defer func() {
		if stopped {
			e.Ctrl.Start(t)
		}
	}()
	p := startProber(e, pairs)
	// A restart of netpol while the controller is away enforces the span
	// it saved.
	for _, n := range e.Cluster.Nodes {
		e.KillPlugin(t, n.Name, "netpol")
	}
	time.Sleep(time.Second)
	n, wrong := p.stop()
	if len(wrong) > 0 {
		t.Fatalf("enforcement changed with the controller down (%d probes):\n%s", n, strings.Join(wrong, "\n"))
	}
	// A policy created meanwhile is enforced once the controller is back.
	e.Apply(t, Types(Policy("y", "deny-yc", Labels("pod", "c")), true, false))
	time.Sleep(time.Second)
	if err := e.Probe("x/b", "y/c", probe.TCP, 80); err != nil {
		t.Fatalf("x/b -> y/c denied while the controller is down (nothing could have told the node): %v", err)
	}
	e.Ctrl.Start(t)
	stopped = false
	want := e.NewReachability(true).Set("*", "x/a", false).Set("y/*", "x/a", true).Set("z/a", "*", false).Set("z/a", "x/*", true).
		Set("z/a", "x/a", false).Set("*", "y/c", false)
	e.Check(t, "the policy created while the controller was down", probe.TCP, 80, want, 30*time.Second)
}

// flowCountBound: one policy with N=500 peers (ipBlocks), M=50 local pods
// and K=5 ports costs at most 1.2×(N+M+K) flows, counted on the switch.
func flowCountBound(t *testing.T, e *Env) {
	defer cleanup(t, e)
	const n, m, k = 500, 50, 5
	node := e.Cluster.Nodes[0]
	ctx := context.Background()
	// M pods on node-1 as the controller sees them: Pod objects with an
	// IP, no data path needed to count flows.
	ns := "fc"
	e.createNamespace(ns)
	defer e.CP.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	for i := range m {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m%d", i), Namespace: ns, Labels: map[string]string{"app": "fc"}},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
		created, err := e.CP.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%v", err)
		}
		ip := fmt.Sprintf("10.250.%d.%d", i/200, i%200+1)
		created.Status.Phase = corev1.PodRunning
		created.Status.PodIP, created.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		if _, err := e.CP.Client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("%v", err)
		}
	}
	count := func() int {
		info := e.Plugin(t, node.Name, "netpol")
		out := node.OVS.Ofctl(t, "dump-flows", "br-int", fmt.Sprintf("cookie=0x%04x000000000000/0xffff000000000000", info.CookiePrefix))
		c := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "cookie=") {
				c++
			}
		}
		return c
	}
	// settled is the count once it has held still for a second and ok
	// accepts it. The previous case's flows may still be on their way
	// out even then (a plugin restarted by it reconnects to the
	// controller with a backoff; in CI its deletions came 6 s after a
	// quiet spell).
	settled := func(what string, ok func(c int) error) int {
		last, stable := -1, 0
		err := waitFor(what, 30*time.Second, func() error {
			c := count()
			if c != last {
				last, stable = c, 0
				return fmt.Errorf("%d flows, still changing", c)
			}
			if err := ok(c); err != nil {
				return err
			}
			if stable++; stable < 5 {
				return fmt.Errorf("%d flows, holding still", c)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, e.agentLogs(20))
		}
		return last
	}
	np := Policy(ns, "big", Labels("app", "fc"))
	var peers []networkingv1.NetworkPolicyPeer
	for i := range n {
		peers = append(peers, IPPeer(fmt.Sprintf("10.251.%d.%d/32", i/200, i%200+1)))
	}
	var ports []networkingv1.NetworkPolicyPort
	for i := range k {
		ports = append(ports, Port(tcp, int32(9000+2*i)))
	}
	// The policy's flows are what it adds to a settled switch and its
	// deletion takes away again; if the rest of the switch moved in
	// between (the two baselines differ), the round is tried again.
	var got int
	for round := 1; ; round++ {
		before := settled("a settled switch on "+node.Name, func(int) error { return nil })
		e.Apply(t, In(np, peers, ports...))
		with := settled("netpol's flows for the big policy on "+node.Name, func(c int) error {
			if c < before+n+m+k {
				return fmt.Errorf("%d flows so far", c-before)
			}
			return nil
		})
		if err := e.CP.Client.NetworkingV1().NetworkPolicies(ns).Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting NetworkPolicy %s/%s: %v", ns, np.Name, err)
		}
		without := settled("the big policy's flows to go from "+node.Name, func(c int) error {
			if c > with-(n+m+k) {
				return fmt.Errorf("%d flows left of %d", c, with)
			}
			return nil
		})
		if without == before {
			got = with - without
			break
		}
		if round == 3 {
			t.Fatalf("the switch did not hold still around the policy: %d flows before, %d with it, %d after (3 rounds)", before, with, without)
		}
		t.Logf("round %d: %d flows before the policy, %d after it: other flows moved; again", round, before, without)
	}
	bound := 1.2 * float64(n+m+k)
	t.Logf("N=%d M=%d K=%d: %d flows on the switch (N+M+K = %d, bound %.0f)", n, m, k, got, n+m+k, bound)
	if float64(got) > bound {
		t.Fatalf("%d flows for N=%d, M=%d, K=%d; want at most %.0f", got, n, m, k, bound)
	}
}

// realizationStatus: netpol reports what it enforces, and the controller
// shows the policy realized on every node of its span.
func realizationStatus(t *testing.T, e *Env) {
	defer cleanup(t, e)
	spec := crdv1.PolicySpec{Tier: "application", Priority: 3, AppliedTo: []crdv1.AppliedTo{{PodSelector: Labels("pod", "a"),
		NamespaceSelector: &metav1.LabelSelector{}}}, Ingress: []crdv1.Rule{{Name: "all", Action: crdv1.RuleActionAllow}}}
	e.ApplyClusterPolicy(t, "every-a", spec)
	nodes := map[string]bool{}
	for _, ns := range Namespaces {
		nodes[e.NodeOf(ns+"/a")] = true
	}
	err := waitFor("every-a realized on its nodes", 30*time.Second, func() error {
		st, gen := e.ClusterPolicyStatus(t, "every-a")
		if st.ObservedGeneration != gen || st.Phase != crdv1.PolicyRealized || int(st.DesiredNodesRealized) != len(nodes) ||
			st.CurrentNodesRealized != st.DesiredNodesRealized {
			return fmt.Errorf("status %+v (generation %d), want Realized on %d of %d nodes", st, gen, len(nodes), len(nodes))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	// A new generation is realized again.
	spec.Ingress[0].Name = "all-renamed"
	e.ApplyClusterPolicy(t, "every-a", spec)
	err = waitFor("every-a's new generation realized", 30*time.Second, func() error {
		st, gen := e.ClusterPolicyStatus(t, "every-a")
		if st.ObservedGeneration != gen || gen < 2 || st.Phase != crdv1.PolicyRealized || st.CurrentNodesRealized != int32(len(nodes)) {
			return fmt.Errorf("status %+v (generation %d)", st, gen)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
}
