package service

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/itest/upstream"
)

// The kube-proxy baseline of the benchmarks (issue 14): kube-proxy
// v1.37.2 in nftables mode, built from the kube tools module
// (upstream.KubeProxy), one process per node inside the node's network
// namespace, on a cluster whose agents run podnet and tunnel but not the
// service plugin.
//
// The path of a pod's connection to a ClusterIP then: the pod sends
// everything to its gateway MAC; with no service flows in br-int, podnet
// switches a packet for an address that is no pod to the gateway port, so
// it reaches the node's kernel (forwarding is on: tunnel's hostnet), where
// kube-proxy's nftables rules DNAT it to an endpoint; the kernel routes
// that back into br-int through the gateway (its own pod CIDR, and
// tunnel's routes for the other nodes'), and br-int delivers it locally or
// over the tunnel. The endpoint's answer would go straight back to the
// client pod inside br-int (podnet and tunnel forward pod to pod at L3),
// never passing the node's conntrack that holds the DNAT, and the client
// would get a segment from the endpoint's address and reset it. So
// kube-proxy runs with --masquerade-all: the request leaves the node's
// kernel from the gateway address, the answer is addressed to the gateway
// and comes back through the kernel, which undoes both NATs. This is the
// harness's setting, the same kube-proxy binary and mode; a CNI that ships
// with kube-proxy (Antrea's kube-proxy mode) instead returns such answers
// to the gateway with a conntrack mark in its own flows, which podnet
// does not have (the service plugin is Switchyard's answer).

// kubeProxyAPIServer is where the apiserver is forwarded into a node for
// kube-proxy; the agent's own forward is on 6443.
const kubeProxyAPIServer = "127.0.0.1:6444"

// podCIDRs covers every harness node's pod CIDR (10.244.<index>.0/24).
const podCIDRs = "10.244.0.0/16"

// kubeProxy is kube-proxy running on one node.
type kubeProxy struct {
	node *cluster.Node
	proc *testenv.Process
	done bool
}

// kubeProxyBin returns the cached kube-proxy binary, building it the first
// time on this machine (make tools-bench does that ahead of the
// benchmark). The tests never call it, so make test never builds it.
func kubeProxyBin(t testenv.T) string {
	t.Helper()
	testenv.LookPath(t, "nft", "nftables")
	toolsDir, err := testenv.SourceDir("tools")
	if err != nil {
		t.Fatalf("%v", err)
	}
	dir, err := upstream.EnsureGroup(toolsDir, upstream.KubeProxy, t.Logf)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return filepath.Join(dir, "kube-proxy")
}

// kubeProxyKubeconfig forwards the apiserver into n (once for the env's
// life) and writes a kubeconfig naming it there, with the harness's admin
// token (kube-proxy's own RBAC, system:node-proxier, is not what is
// measured).
func (e *env) kubeProxyKubeconfig(t testenv.T, n *cluster.Node) string {
	t.Helper()
	if kc, ok := e.kpKubeconfig[n.Name]; ok {
		return kc
	}
	u, err := url.Parse(e.cp.URL)
	if err != nil {
		t.Fatalf("%v", err)
	}
	cluster.Forward(t, n.NetNS, kubeProxyAPIServer, u.Host)
	ca, err := os.ReadFile(e.cp.CAFile)
	if err != nil {
		t.Fatalf("%v", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["itest"] = &clientcmdapi.Cluster{Server: "https://" + kubeProxyAPIServer, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: e.cp.Config.BearerToken}
	cfg.Contexts["itest"] = &clientcmdapi.Context{Cluster: "itest", AuthInfo: "admin"}
	cfg.CurrentContext = "itest"
	kc := filepath.Join(testenv.Dir(t, fmt.Sprintf("kube-proxy-kubeconfig-n%d", n.Index)), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatalf("writing %s: %v", kc, err)
	}
	e.kpKubeconfig[n.Name] = kc
	return kc
}

// startKubeProxies starts kube-proxy on every node (the service plugin
// must be off) and returns when every process runs; whether its rules are
// in place is for a probe to tell.
func (e *env) startKubeProxies(t testenv.T) {
	t.Helper()
	if e.kpBin == "" {
		e.kpBin = kubeProxyBin(t)
	}
	for _, n := range e.c.Nodes {
		if e.kubeProxies[n.Name] != nil {
			t.Fatalf("kube-proxy already runs on %s", n.Name)
		}
		e.kubeProxies[n.Name] = e.startKubeProxy(t, n)
	}
}

// startKubeProxy runs kube-proxy on n, in a temp dir of its own, and
// registers its stop (and the removal of its tables) on t.
func (e *env) startKubeProxy(t testenv.T, n *cluster.Node) *kubeProxy {
	t.Helper()
	kc := e.kubeProxyKubeconfig(t, n)
	dir := testenv.Dir(t, fmt.Sprintf("kube-proxy-n%d", n.Index))
	args := []string{
		"--kubeconfig=" + kc,
		"--proxy-mode=nftables",
		"--hostname-override=" + n.Name,
		"--bind-address=" + n.UnderlayIP.String(), // the node IP
		"--cluster-cidr=" + podCIDRs,
		"--masquerade-all", // answers must come back through the kernel: see above
		// Loopback of the node's own namespace, so nothing collides with
		// another node or run.
		"--metrics-bind-address=127.0.0.1:10249",
		"--healthz-bind-address=127.0.0.1:10256",
		// Leave the kernel's conntrack limits and timeouts as they are, as
		// the service plugin does (and nf_conntrack_max is the machine's).
		"--conntrack-max-per-core=0", "--conntrack-min=0",
		"--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--oom-score-adj=0",
		"--v=1",
	}
	p, err := testenv.StartProcess(testenv.ProcessSpec{Name: "kube-proxy", Path: e.kpBin, Args: args, NetNS: n.NetNS, Dir: dir})
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	kp := &kubeProxy{node: n, proc: p}
	t.Cleanup(func() {
		if err := kp.stop(); err != nil {
			t.Logf("%v", err)
		}
	})
	return kp
}

// stopKubeProxies stops kube-proxy on every node and removes its tables.
func (e *env) stopKubeProxies(t testenv.T) {
	t.Helper()
	for name, kp := range e.kubeProxies {
		if err := kp.stop(); err != nil {
			t.Fatalf("%v", err)
		}
		delete(e.kubeProxies, name)
	}
}

// stop ends kube-proxy and deletes the nftables tables it made (it leaves
// them behind when it exits). Idempotent.
func (kp *kubeProxy) stop() error {
	if kp.done {
		return nil
	}
	kp.done = true
	kp.proc.Stop(10 * time.Second)
	out, err := kp.node.Exec("nft", "list", "tables")
	if err != nil {
		return fmt.Errorf("%s: listing nftables tables after kube-proxy: %v", kp.node.Name, err)
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l) // table <family> <name>
		if len(f) == 3 && f[0] == "table" && f[2] == "kube-proxy" {
			if _, err := kp.node.Exec("nft", "delete", "table", f[1], "kube-proxy"); err != nil {
				return fmt.Errorf("%s: removing kube-proxy's table: %v", kp.node.Name, err)
			}
		}
	}
	return nil
}

// kubeProxiesAlive fails as Permanent when kube-proxy on the node has exited.
func (e *env) kubeProxiesAlive() error {
	for name, kp := range e.kubeProxies {
		if kp.proc.Exited() {
			return testenv.Permanent(fmt.Errorf("kube-proxy on %s exited:\n%s", name, kp.proc.Tail(30)))
		}
	}
	return nil
}

// servicePluginOff disables the service plugin on every node (the
// operator's config edit and reload) and waits until every agent has
// unloaded it, which removes its flows.
func (e *env) servicePluginOff(t testenv.T) {
	t.Helper()
	for _, n := range e.c.Nodes {
		e.agents[n.Name].Disable(t, "service")
	}
	for _, n := range e.c.Nodes {
		err := testenv.Eventually("service unloaded on "+n.Name, time.Minute, 100*time.Millisecond, func() error {
			if s, _, _ := e.plugin(t, n, "service"); s != "not listed" {
				return fmt.Errorf("service is %s", s)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v\nagent log:\n%s", err, e.agents[n.Name].Process.Tail(40))
		}
	}
}

// servicePluginOn enables the service plugin on every node (config edit
// and reload): each agent starts a new plugin process, which has no state
// of its own to start from. It does not wait for anything.
func (e *env) servicePluginOn(t testenv.T) {
	t.Helper()
	for _, n := range e.c.Nodes {
		e.agents[n.Name].Enable(t, nodeagent.Plugin{Name: "service", Path: bins["service"],
			Config: fmt.Sprintf("{stateDir: %q, serviceCIDRs: [%q]}", filepath.Join(n.Dir, "service"), controlplane.ServiceCIDR)})
	}
}

// rssKiB is the resident set of process pid, from /proc.
func rssKiB(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// cpuTicks is the CPU time (user + system, in clock ticks) process pid
// has used, from /proc.
func cpuTicks(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command, which is in parentheses: state is
	// field 3, utime and stime are 14 and 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.Atoi(f[11])
	k, err2 := strconv.Atoi(f[12])
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("reading /proc/%d/stat: %q", pid, s)
	}
	return u + k, nil
}

// settle waits until the processes pids name have together used less than
// a tenth of one core over a 2-second window: whatever they still do
// after programming (queued work, GC) is over. Bounded by timeout.
func settle(t testenv.T, what string, pids func() []int, timeout time.Duration) {
	t.Helper()
	const window = 2 * time.Second
	sum := func() int {
		n := 0
		for _, pid := range pids() {
			c, err := cpuTicks(pid)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			n += c
		}
		return n
	}
	err := testenv.Eventually(what+" to go idle", timeout, 0, func() error {
		before := sum()
		time.Sleep(window)
		if used := sum() - before; used*10 >= 100*int(window/time.Second) { // USER_HZ is 100
			return fmt.Errorf("%d%% of a core over %s", used*100/(100*int(window/time.Second)), window)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
}

// metrics scrapes kube-proxy's /metrics (inside its node) and returns, by
// metric name, the sum over its label sets (both IP families) of each
// sample whose name starts with one of prefixes.
func (kp *kubeProxy) metrics(prefixes ...string) (map[string]float64, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			return netns.Dial(kp.node.NetNS, network, addr, 5*time.Second)
		}}}
	resp, err := c.Get("http://127.0.0.1:10249/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || strings.HasPrefix(l, "#") {
			continue
		}
		name, _, _ := strings.Cut(f[0], "{")
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				if v, err := strconv.ParseFloat(f[1], 64); err == nil {
					out[name] += v
				}
			}
		}
	}
	return out, nil
}

// syncSummary says, from kube-proxy's metrics, how many full and partial
// rule syncs it did and how long they took in all.
func (kp *kubeProxy) syncSummary() string {
	m, err := kp.metrics("kubeproxy_sync_full_proxy_rules_duration_seconds_", "kubeproxy_sync_partial_proxy_rules_duration_seconds_")
	if err != nil {
		return "no metrics: " + err.Error()
	}
	return fmt.Sprintf("%.0f full syncs in %.1fs, %.0f partial in %.1fs",
		m["kubeproxy_sync_full_proxy_rules_duration_seconds_count"], m["kubeproxy_sync_full_proxy_rules_duration_seconds_sum"],
		m["kubeproxy_sync_partial_proxy_rules_duration_seconds_count"], m["kubeproxy_sync_partial_proxy_rules_duration_seconds_sum"])
}
