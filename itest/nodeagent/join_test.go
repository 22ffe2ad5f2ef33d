package nodeagent_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/testenv"
)

// The agent learns its pod CIDR from its Node. While the Node has none it
// is not ready, says why, and fails an early ADD with "try again later"
// naming the cause; once kube-controller-manager's part is done (the test
// sets spec.podCIDRs) it becomes ready and pods get addresses from that
// CIDR. A plugin gets working cluster credentials in its Start request.
func TestAgentLearnsPodCIDRFromItsNode(t *testing.T) {
	nb, obsBin := joinBins(t)
	cp := controlplane.Start(t)
	c := cluster.Start(t, cluster.Options{Nodes: 1}) // the test registers the Node itself
	n := c.Nodes[0]
	registerNode(t, cp.Client, n.Name, nil, n.UnderlayIP.String())
	events := filepath.Join(n.Dir, "obs.jsonl")
	a := nodeagent.Start(t, n, nodeagent.Options{Bins: nb, ControlPlane: cp, NoWait: true, ReadyWait: 2 * time.Second,
		Extra: []nodeagent.Plugin{observer(obsBin, "obs", 0, events, true)}})

	body := waitReadyz(t, a, 503, "has no pod CIDR yet")
	t.Logf("not ready, as expected:\n%s", body)
	logLine(t, a, "waiting for node facts", "has no pod CIDR yet", "--allocate-node-cidrs")

	_, err := c.TryAddPod(t, cluster.PodSpec{Name: "early", Namespace: "demo", Node: n})
	var cerr *types.Error
	if !errors.As(err, &cerr) || cerr.Code != types.ErrTryAgainLater || !strings.Contains(cerr.Msg, "has no pod CIDR yet") {
		t.Fatalf("early CNI ADD: got %v, want CNI error 11 naming the missing pod CIDR", err)
	}

	ctx := context.Background()
	patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, n.PodCIDR, n.PodCIDR)
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, n.Name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("assigning the pod CIDR: %v", err)
	}
	waitReadyz(t, a, 200, "ok")
	p := c.AddPod(t, cluster.PodSpec{Name: "a", Namespace: "demo", Node: n})
	if !n.PodCIDR.Contains(p.IP()) {
		t.Errorf("pod IP %s is not in the Node's pod CIDR %s", p.IP(), n.PodCIDR)
	}
	start := waitLine(t, events, "the observer's start", func(l line) bool { return l.Kind == "start" })
	if !slices.Equal(start.PodCIDRs, []string{n.PodCIDR.String()}) || !slices.Equal(start.IPs, []string{n.UnderlayIP.String()}) || start.MTU != 1500 || start.PodMTU != 1500 {
		t.Errorf("plugin started with facts %v, want the Node's pod CIDR and InternalIP and the uplink's MTU 1500", start)
	}
	if got := linkMTU(t, p); got != 1500 {
		t.Errorf("pod MTU %d, want the uplink's 1500", got)
	}
	api := waitLine(t, events, "the observer's apiserver check", func(l line) bool { return l.Kind == "apiserver" })
	if api.Status != 200 {
		t.Errorf("plugin reading its Node with the host's credentials: status %d, error %q", api.Status, api.Error)
	}
}

// Node facts that change reach a subscribed plugin: a new node IP, a pod
// MTU lowered by a plugin that declares an encapsulation overhead (pods
// created afterwards get it, earlier ones keep theirs), and a new pod CIDR
// (the gateway's old address is removed, new pods come from the new CIDR).
func TestNodeFactsChangesReachPlugins(t *testing.T) {
	o := startObserved(t, nil, nil)
	cp, c, n, a, events, obsBin := o.cp, o.c, o.n, o.a, o.events, o.obsBin
	before := c.AddPod(t, cluster.PodSpec{Name: "before", Namespace: "demo", Node: n})

	// A second InternalIP.
	setNodeIPs(t, cp.Client, n.Name, n.UnderlayIP.String(), "198.18.0.201")
	waitLine(t, events, "the new node IP", func(l line) bool { return l.Kind == "facts" && slices.Contains(l.IPs, "198.18.0.201") })

	// A plugin with 50 bytes of encapsulation is enabled.
	a.Enable(t, observer(obsBin, "encap", 50, filepath.Join(n.Dir, "encap.jsonl"), false))
	waitLine(t, events, "the lowered pod MTU", func(l line) bool { return l.Kind == "facts" && l.PodMTU == 1450 && l.MTU == 1500 })
	waitReadyz(t, a, 200, "ok")
	after := c.AddPod(t, cluster.PodSpec{Name: "after", Namespace: "demo", Node: n})
	if got := linkMTU(t, after); got != 1450 {
		t.Errorf("pod created after the overhead was declared has MTU %d, want 1450", got)
	}
	if got := linkMTU(t, before); got != 1500 {
		t.Errorf("pod created before has MTU %d, want its 1500 kept", got)
	}

	// The Node is replaced with another pod CIDR.
	newCIDR := "10.245.1.0/24"
	if err := cp.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	registerNode(t, cp.Client, n.Name, []string{newCIDR}, n.UnderlayIP.String())
	waitLine(t, events, "the new pod CIDR", func(l line) bool { return l.Kind == "facts" && slices.Equal(l.PodCIDRs, []string{newCIDR}) })
	if err := testenv.Eventually("sy-gw0 to hold 10.245.1.1 and not 10.244.1.1", 30*time.Second, 100*time.Millisecond, func() error {
		if g := gatewayAddrs(t, n); !strings.Contains(g, "10.245.1.1/24") || strings.Contains(g, "10.244.1.1/") {
			return fmt.Errorf("sy-gw0: %s", g)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v", err)
	}
	renumbered := c.AddPod(t, cluster.PodSpec{Name: "renumbered", Namespace: "demo", Node: n})
	_, want, _ := net.ParseCIDR(newCIDR)
	if !want.Contains(renumbered.IP()) {
		t.Errorf("pod after the CIDR change got %s, want an address in %s", renumbered.IP(), newCIDR)
	}
	if out, err := netns.Exec(renumbered.NetNS, "ping", "-c", "2", "-W", "2", "10.245.1.1"); err != nil {
		t.Errorf("new pod -> new gateway 10.245.1.1: %v\n%s", err, out)
	}
}

// Other nodes reach every subscribed plugin as node events with the right
// facts, through one watch of Nodes however many plugins subscribe.
func TestNodeEventsReachSubscribers(t *testing.T) {
	nb, obsBin := joinBins(t)
	cp := controlplane.Start(t)
	c := cluster.Start(t, cluster.Options{Nodes: 1})
	n := c.Nodes[0]
	registerNode(t, cp.Client, n.Name, []string{n.PodCIDR.String()}, n.UnderlayIP.String())
	fa, fb := filepath.Join(n.Dir, "a.jsonl"), filepath.Join(n.Dir, "b.jsonl")
	// The apiserver's own informers may watch nodes too: count the agent's.
	base := nodeWatches(t, cp)
	a := nodeagent.Start(t, n, nodeagent.Options{Bins: nb, ControlPlane: cp,
		Extra: []nodeagent.Plugin{observer(obsBin, "obs-a", 0, fa, false), observer(obsBin, "obs-b", 0, fb, false)}})
	waitReadyz(t, a, 200, "ok")

	registerNode(t, cp.Client, "remote-1", []string{"10.244.9.0/24"}, "198.18.0.9")
	setNodeIPs(t, cp.Client, "remote-1", "198.18.0.19")
	// A change node events do not carry produces none.
	if _, err := cp.Client.CoreV1().Nodes().Patch(context.Background(), "remote-1", "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"zone":"b"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.CoreV1().Nodes().Delete(context.Background(), "remote-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"node-added remote-1 ips=[198.18.0.9] cidrs=[10.244.9.0/24] mtu=0 pod_mtu=0",
		"node-updated remote-1 ips=[198.18.0.19] cidrs=[10.244.9.0/24] mtu=0 pod_mtu=0",
		"node-deleted remote-1 ips=[198.18.0.19] cidrs=[10.244.9.0/24] mtu=0 pod_mtu=0",
	}
	for _, f := range []string{fa, fb} {
		waitLine(t, f, "the deletion of remote-1", func(l line) bool { return l.Kind == "node-deleted" })
		var got []string
		for _, l := range readLines(t, f) {
			if l.Node == "remote-1" {
				got = append(got, l.String())
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s saw:\n%s\nwant:\n%s", filepath.Base(f), strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if w := nodeWatches(t, cp) - base; w != 1 {
		t.Errorf("the agent holds %d watches of nodes (apiserver_longrunning_requests, less the %d before it started), want 1 (one agent, two subscribing plugins)", w, base)
	}
}

// With the apiserver gone for 20 s the datapath stays exactly as it was
// (ping between pods never stops, no flow changes); the changes made
// meanwhile (through a second apiserver the agent does not know) arrive
// after it is back, and nothing else does.
func TestAPIServerOutageKeepsDatapath(t *testing.T) {
	o := startObserved(t, nil, func(cp *controlplane.ControlPlane) {
		registerNode(t, cp.Client, "remote-1", []string{"10.244.11.0/24"}, "198.18.0.11")
		registerNode(t, cp.Client, "remote-3", []string{"10.244.13.0/24"}, "198.18.0.13")
	})
	cp, c, n, a, events := o.cp, o.c, o.n, o.a, o.events
	waitLine(t, events, "remote-3 added", func(l line) bool { return l.Kind == "node-added" && l.Node == "remote-3" })
	pa := c.AddPod(t, cluster.PodSpec{Name: "a", Namespace: "demo", Node: n})
	pb := c.AddPod(t, cluster.PodSpec{Name: "b", Namespace: "demo", Node: n})
	seen := len(readLines(t, events))
	flowsBefore := n.OVS.Ofctl(t, "dump-flows", "br-int", "--no-stats")

	// 30 s of pings, 5 a second, spanning the whole outage.
	ping := exec.Command("ip", "netns", "exec", pa.NetNS, "ping", "-i", "0.2", "-c", "150", "-W", "1", pb.IP().String())
	var pingOut strings.Builder
	ping.Stdout, ping.Stderr = &pingOut, &pingOut
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ping.Process.Kill() })

	outage := time.Now()
	cp.StopAPIServer()
	elsewhere, stopElsewhere, err := cp.StartAPIServerElsewhere()
	if err != nil {
		t.Fatalf("%v", err)
	}
	other, err := kubernetes.NewForConfig(elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	registerNode(t, other, "remote-2", []string{"10.244.12.0/24"}, "198.18.0.12")
	if err := other.CoreV1().Nodes().Delete(ctx, "remote-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	setNodeIPs(t, other, "remote-3", "198.18.0.33")
	stopElsewhere()
	if code, body, err := a.Readyz(); err != nil || code != 200 {
		t.Errorf("during the outage /readyz answered %d %q (%v); the agent still has everything it needs", code, body, err)
	}
	time.Sleep(time.Until(outage.Add(20 * time.Second)))
	if err := cp.StartAPIServer(); err != nil {
		t.Fatalf("restarting the apiserver: %v", err)
	}

	waitLine(t, events, "remote-2 added after the outage", func(l line) bool { return l.Kind == "node-added" && l.Node == "remote-2" })
	waitLine(t, events, "remote-1 deleted after the outage", func(l line) bool { return l.Kind == "node-deleted" && l.Node == "remote-1" })
	waitLine(t, events, "remote-3 updated after the outage", func(l line) bool { return l.Kind == "node-updated" && l.Node == "remote-3" })
	if err := ping.Wait(); err != nil {
		t.Errorf("ping a -> b across the outage: %v\n%s", err, pingOut.String())
	}
	if !strings.Contains(pingOut.String(), " 0% packet loss") {
		t.Errorf("ping a -> b lost packets across the outage:\n%s", pingOut.String())
	}
	if after := n.OVS.Ofctl(t, "dump-flows", "br-int", "--no-stats"); after != flowsBefore {
		t.Errorf("flows changed across the outage:\nbefore:\n%s\nafter:\n%s", flowsBefore, after)
	}
	time.Sleep(2 * time.Second) // anything spurious would follow the relist at once
	var extra []string
	for _, l := range readLines(t, events)[seen:] {
		extra = append(extra, l.String())
	}
	want := []string{
		"node-added remote-2 ips=[198.18.0.12] cidrs=[10.244.12.0/24] mtu=0 pod_mtu=0",
		"node-deleted remote-1 ips=[198.18.0.11] cidrs=[10.244.11.0/24] mtu=0 pod_mtu=0",
		"node-updated remote-3 ips=[198.18.0.33] cidrs=[10.244.13.0/24] mtu=0 pod_mtu=0",
	}
	slices.Sort(extra)
	slices.Sort(want)
	if !slices.Equal(extra, want) {
		t.Errorf("events after the outage:\n%s\nwant exactly the missed changes:\n%s", strings.Join(extra, "\n"), strings.Join(want, "\n"))
	}
}

// /readyz turns ready only once podnet is Synced: at start, and again after
// podnet is killed and restarted by the host. /livez answers throughout,
// on the API socket and on the TCP health port.
func TestReadyzFollowsPodnetSync(t *testing.T) {
	nb, _ := joinBins(t)
	cp := controlplane.Start(t)
	c := cluster.Start(t, cluster.Options{Nodes: 1})
	n := c.Nodes[0]
	registerNode(t, cp.Client, n.Name, []string{n.PodCIDR.String()}, n.UnderlayIP.String())
	const healthPort = 10351
	a := nodeagent.Start(t, n, nodeagent.Options{Bins: nb, ControlPlane: cp, NoWait: true, HealthPort: healthPort})

	// Each time /readyz says ok, podnet must already be synced (its state
	// only moves forward until it is killed).
	watchReady := func(what string) {
		t.Helper()
		if err := testenv.Eventually(what, 90*time.Second, 20*time.Millisecond, func() error {
			code, body, err := a.Readyz()
			if err != nil || code != 200 {
				return fmt.Errorf("%d %s %v", code, body, err)
			}
			if st := podnetState(t, a); st != "synced" {
				return testenv.Permanent(fmt.Errorf("/readyz said ok while podnet was %q", st))
			}
			return nil
		}); err != nil {
			t.Fatalf("%v", err)
		}
	}
	watchReady("the agent to become ready")
	pid := podnetPID(t, a)
	// The host restarts podnet within tens of milliseconds on an idle
	// machine, so the 503 window is short: watch for it closely from
	// before the kill.
	seen := make(chan string, 1)
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if code, b, err := a.Readyz(); err == nil && code == 503 && strings.Contains(b, "plugin podnet") {
				seen <- b
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		close(seen)
	}()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	body, ok := <-seen
	if !ok {
		t.Fatalf("/readyz never answered 503 naming podnet in the 30s after podnet was killed\nagent log:\n%s", a.Process.Tail(20))
	}
	t.Logf("after killing podnet:\n%s", body)
	watchReady("the agent to be ready again after podnet's restart")
	if code, _, err := a.Livez(); err != nil || code != 200 {
		t.Errorf("/livez: %d %v", code, err)
	}
	for _, path := range []string{"/readyz", "/livez"} {
		if code, err := tcpGet(n, fmt.Sprintf("%s:%d", n.UnderlayIP, healthPort), path); err != nil || code != 200 {
			t.Errorf("GET %s on the health port: %d %v", path, code, err)
		}
	}
}

// Bad input is named, with its fix, in one log line (and in /readyz).
func TestBadInputNamesCauseAndFix(t *testing.T) {
	nb, _ := joinBins(t)
	cp := controlplane.Start(t)
	c := cluster.Start(t, cluster.Options{Nodes: 4})
	for _, tc := range []struct {
		name  string
		node  int
		setup func(t *testing.T, n *cluster.Node, o *nodeagent.Options)
		want  []string
	}{
		{"kubeconfig pointing nowhere", 0, func(t *testing.T, n *cluster.Node, o *nodeagent.Options) {
			registerNode(t, cp.Client, n.Name, []string{n.PodCIDR.String()}, n.UnderlayIP.String())
			o.Kubeconfig = writeNowhereKubeconfig(t, n)
		}, []string{"cannot reach the apiserver at https://127.0.0.1:1", "check the server address in the kubeconfig"}},
		{"token without RBAC for nodes", 1, func(t *testing.T, n *cluster.Node, o *nodeagent.Options) {
			registerNode(t, cp.Client, n.Name, []string{n.PodCIDR.String()}, n.UnderlayIP.String())
			o.ServiceAccount = "switchyard-agent-no-rbac"
		}, []string{`system:serviceaccount:kube-system:switchyard-agent-no-rbac`, "may not get, list, watch resource nodes", "grant the verbs"}},
		{"node name with no Node", 2, func(t *testing.T, n *cluster.Node, o *nodeagent.Options) {
			o.NodeName = "no-such-node"
		}, []string{`the apiserver has no Node \"no-such-node\"`, "must be the name the kubelet registered"}},
		{"pod CIDR overlapping the node IP", 3, func(t *testing.T, n *cluster.Node, o *nodeagent.Options) {
			registerNode(t, cp.Client, n.Name, []string{"198.18.0.0/24"}, n.UnderlayIP.String())
		}, []string{"pod CIDR 198.18.0.0/24 contains the node's own address " + "198.18.0.4", "--cluster-cidr outside the node network"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := c.Nodes[tc.node]
			o := nodeagent.Options{Bins: nb, ControlPlane: cp, NoWait: true}
			tc.setup(t, n, &o)
			a := nodeagent.Start(t, n, o)
			l := logLine(t, a, tc.want...)
			t.Logf("log line: %s", l)
			waitReadyz(t, a, 503, strings.ReplaceAll(tc.want[0], `\"`, `"`))
		})
	}
}

func writeNowhereKubeconfig(t *testing.T, n *cluster.Node) string {
	p := filepath.Join(n.Dir, "kubeconfig-nowhere")
	body := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\n" +
		"users:\n- name: u\n  user: {token: x}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n"
	if err := writeFile(p, body); err != nil {
		t.Fatal(err)
	}
	return p
}
