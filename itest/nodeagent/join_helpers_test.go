package nodeagent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"switchyard.dev/switchyard/itest/build"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/testenv"
)

// joinBins builds the agent, CNI, podnet and the observer test plugin.
func joinBins(t testing.TB) (nodeagent.Binaries, string) {
	bins := build.Commands(t, "host/cmd/switchyard-agent", "cni/cmd/switchyard-cni", "plugins/podnet", "plugins/testplugins/observer")
	return nodeagent.Binaries{Agent: bins["switchyard-agent"], CNI: bins["switchyard-cni"], Plugins: map[string]string{"podnet": bins["podnet"]}}, bins["observer"]
}

// observed is one node of a cluster joined to a control plane, its agent
// running podnet and the observer plugin "obs", which records into events.
type observed struct {
	cp     *controlplane.ControlPlane
	c      *cluster.Cluster
	n      *cluster.Node
	a      *nodeagent.Agent
	events string
	obsBin string
}

// startObserved registers the node (and, with before, anything else the
// agent should find at its start), starts its agent with podnet's extra
// config and waits until it is ready.
func startObserved(t *testing.T, podnet map[string]any, before func(*controlplane.ControlPlane)) observed {
	t.Helper()
	nb, obsBin := joinBins(t)
	cp := controlplane.Start(t)
	c := cluster.Start(t, cluster.Options{Nodes: 1})
	n := c.Nodes[0]
	registerNode(t, cp.Client, n.Name, []string{n.PodCIDR.String()}, n.UnderlayIP.String())
	if before != nil {
		before(cp)
	}
	events := filepath.Join(n.Dir, "obs.jsonl")
	a := nodeagent.Start(t, n, nodeagent.Options{Bins: nb, ControlPlane: cp, Config: map[string]map[string]any{"podnet": podnet},
		Extra: []nodeagent.Plugin{observer(obsBin, "obs", 0, events, false)}})
	waitReadyz(t, a, 200, "ok")
	return observed{cp: cp, c: c, n: n, a: a, events: events, obsBin: obsBin}
}

// observer enables the observer test plugin under name, declaring overhead
// bytes of encapsulation and recording into file.
func observer(bin, name string, overhead int, file string, checkAPIServer bool) nodeagent.Plugin {
	return nodeagent.Plugin{Name: name, Path: bin, Args: []string{name, strconv.Itoa(overhead)},
		Config: fmt.Sprintf("{eventsFile: %s, checkAPIServer: %v}", file, checkAPIServer)}
}

// line is one observation of the observer plugin.
type line struct {
	Kind     string   `json:"kind"`
	Node     string   `json:"node"`
	IPs      []string `json:"ips"`
	PodCIDRs []string `json:"podCIDRs"`
	MTU      int      `json:"mtu"`
	PodMTU   int      `json:"podMTU"`
	Status   int      `json:"status"`
	Error    string   `json:"error"`
}

func (l line) String() string {
	return fmt.Sprintf("%s %s ips=%v cidrs=%v mtu=%d pod_mtu=%d", l.Kind, l.Node, l.IPs, l.PodCIDRs, l.MTU, l.PodMTU)
}

func readLines(t testing.TB, file string) []line {
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer f.Close()
	var out []line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("observer line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// waitLine waits until the observer recorded a line matching ok.
func waitLine(t testing.TB, file, what string, ok func(line) bool) line {
	t.Helper()
	var found line
	err := testenv.Eventually(what, 60*time.Second, 100*time.Millisecond, func() error {
		for _, l := range readLines(t, file) {
			if ok(l) {
				found = l
				return nil
			}
		}
		return fmt.Errorf("not recorded in %s yet; lines:\n%v", filepath.Base(file), readLines(t, file))
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	return found
}

// registerNode creates n's Node object as the kubelet would, with the given
// pod CIDRs (none: as before kube-controller-manager assigns one) and its
// underlay IP as InternalIP. It is deleted on cleanup.
func registerNode(t testing.TB, c kubernetes.Interface, name string, cidrs []string, ips ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: cidrs}}
	if len(cidrs) > 0 {
		obj.Spec.PodCIDR = cidrs[0]
	}
	// The kubelet registers its Node with its addresses in one create, so
	// watchers see the node whole.
	for _, ip := range ips {
		obj.Status.Addresses = append(obj.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	created, err := c.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Node %s: %v", name, err)
	}
	if len(created.Status.Addresses) != len(ips) {
		t.Fatalf("Node %s was created without its addresses (%v); the apiserver dropped status on create", name, created.Status.Addresses)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// setNodeIPs replaces a Node's InternalIPs.
func setNodeIPs(t testing.TB, c kubernetes.Interface, name string, ips ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	n.Status.Addresses = nil
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating the addresses of Node %s: %v", name, err)
	}
}

// waitReadyz waits until the agent's /readyz answers want, returning the body.
func waitReadyz(t testing.TB, a *nodeagent.Agent, want int, bodyHas string) string {
	t.Helper()
	var body string
	err := testenv.Eventually(fmt.Sprintf("/readyz of the agent on %s to answer %d", a.Node.Name, want), 90*time.Second, 50*time.Millisecond, func() error {
		if a.Process.Exited() {
			return testenv.Permanent(fmt.Errorf("agent exited:\n%s", a.Process.Tail(30)))
		}
		code, b, err := a.Readyz()
		if err != nil {
			return err
		}
		body = b
		if code != want || !strings.Contains(b, bodyHas) {
			return fmt.Errorf("answered %d: %s", code, b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, a.Process.Tail(20))
	}
	return body
}

// logLine waits for one line of the agent's log that holds every part.
func logLine(t testing.TB, a *nodeagent.Agent, parts ...string) string {
	t.Helper()
	var found string
	err := testenv.Eventually("agent log line naming "+strings.Join(parts, " … "), 60*time.Second, 100*time.Millisecond, func() error {
		for _, l := range strings.Split(a.Log(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(l, p)
			}
			if all {
				found = l
				return nil
			}
		}
		return fmt.Errorf("not logged yet")
	})
	if err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, a.Process.Tail(30))
	}
	return found
}

// nodeWatches counts the apiserver's open WATCH requests on nodes.
func nodeWatches(t testing.TB, cp *controlplane.ControlPlane) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("apiserver /metrics: %v", err)
	}
	n := 0
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "apiserver_longrunning_requests{") && strings.Contains(l, `resource="nodes"`) && strings.Contains(l, `verb="WATCH"`) {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += int(v)
		}
	}
	return n
}

// gatewayAddrs lists the addresses on the node's gateway port.
func gatewayAddrs(t testing.TB, n *cluster.Node) string {
	out, err := n.Exec("ip", "-o", "addr", "show", "dev", "sy-gw0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

// linkMTU returns the MTU of the pod's eth0.
func linkMTU(t testing.TB, p *cluster.Pod) int {
	out, err := testenv.Run("ip", "-n", p.NetNS, "-o", "link", "show", "eth0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	f := strings.Fields(out)
	for i := range f {
		if f[i] == "mtu" && i+1 < len(f) {
			m, _ := strconv.Atoi(f[i+1])
			return m
		}
	}
	t.Fatalf("no mtu in %q", out)
	return 0
}

func writeFile(p, body string) error { return os.WriteFile(p, []byte(body), 0o600) }

// plugins reads GET /v1/plugins from the agent.
func pluginRow(t testing.TB, a *nodeagent.Agent, name string) map[string]any {
	code, body, err := a.Get("/v1/plugins")
	if err != nil || code != 200 {
		t.Fatalf("/v1/plugins: %d %v", code, err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(body), &rows); err != nil {
		t.Fatalf("/v1/plugins: %v", err)
	}
	for _, r := range rows {
		if r["name"] == name {
			return r
		}
	}
	return nil
}

func podnetState(t testing.TB, a *nodeagent.Agent) string {
	r := pluginRow(t, a, "podnet")
	if r == nil {
		return "not started"
	}
	s, _ := r["state"].(string)
	return s
}

func podnetPID(t testing.TB, a *nodeagent.Agent) int {
	r := pluginRow(t, a, "podnet")
	if r == nil {
		t.Fatal("podnet not listed")
	}
	f, _ := r["pid"].(float64)
	return int(f)
}

// tcpGet does GET path on addr from inside the node, as kubelet's probe would.
func tcpGet(n *cluster.Node, addr, path string) (int, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			return netns.Dial(n.NetNS, "tcp", a, 5*time.Second)
		}}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
