package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/ovs"
	"switchyard.dev/switchyard/itest/testenv"
)

// bins holds the binaries TestMain builds once per run.
var bins struct{ agent, alpha, beta, gamma, template string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sy-host-bins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if err := buildBinaries(dir); err != nil {
			fmt.Fprintln(os.Stderr, "itest/host:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

func buildBinaries(dir string) error {
	root, err := testenv.SourceDir("..")
	if err != nil {
		return err
	}
	build := func(workdir, out string, pkgs ...string) error {
		cmd := exec.Command("go", append([]string{"build", "-o", out}, pkgs...)...)
		cmd.Dir = workdir
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %v: %v\n%s", pkgs, err, b)
		}
		return nil
	}
	if err := build(root, dir+"/", "./host/cmd/switchyard-agent", "./plugins/testplugins/alpha", "./plugins/testplugins/beta", "./plugins/testplugins/gamma"); err != nil {
		return err
	}
	if err := build(filepath.Join(root, "plugins", "template"), filepath.Join(dir, "template"), "."); err != nil {
		return err
	}
	bins.agent, bins.alpha, bins.beta, bins.gamma, bins.template = dir+"/switchyard-agent", dir+"/alpha", dir+"/beta", dir+"/gamma", dir+"/template"
	return nil
}

// pod is a network namespace attached to br-int through a veth.
type pod struct {
	ns     string
	hostIf string // the veth end in the OVS namespace
	ip     string
	mac    string
	ofport uint32
}

// node is one OVS instance plus an agent and its pods.
type node struct {
	t       testing.TB
	sw      *ovs.Switch
	dir     string
	cfgPath string
	agent   *testenv.Process
	pods    []pod
}

// newNode starts OVS (the agent creates br-int itself) and two pods.
func newNode(t testing.TB) *node {
	t.Helper()
	n := &node{t: t, sw: ovs.Start(t, ovs.Options{Name: "hst"})}
	n.dir = testenv.Dir(t, "agent")
	n.cfgPath = filepath.Join(n.dir, "agent.yaml")
	for i, name := range []string{"pa", "pb"} {
		p := pod{ns: netns.Create(t, testenv.Name(name)), hostIf: name + "0",
			ip: fmt.Sprintf("10.0.0.%d", i+1), mac: fmt.Sprintf("02:00:00:00:00:%02x", i+1), ofport: uint32(10 + i)}
		// Create both ends inside the pod and push the host end into the OVS
		// namespace at once, so no name ever appears in the root namespace.
		for _, args := range [][]string{
			{"-n", p.ns, "link", "add", "eth0", "address", p.mac, "type", "veth", "peer", "name", p.hostIf, "netns", n.sw.NetNS},
			{"-n", p.ns, "addr", "add", p.ip + "/24", "dev", "eth0"},
			{"-n", p.ns, "link", "set", "eth0", "up"},
			{"-n", n.sw.NetNS, "link", "set", p.hostIf, "up"},
		} {
			if _, err := testenv.Run("ip", args...); err != nil {
				t.Fatalf("pod %s: %v", name, err)
			}
		}
		n.pods = append(n.pods, p)
	}
	return n
}

// puntIP is an address alpha punts ICMP for (packet-in, then packet-out).
const puntIP = "10.0.0.99"

type pluginEntry struct {
	name, path string
	config     map[string]any
	args       []string
}

func (n *node) portsConfig() []map[string]any {
	var out []map[string]any
	for _, p := range n.pods {
		out = append(out, map[string]any{"name": p.hostIf, "ofport": p.ofport, "ip": p.ip, "mac": p.mac})
	}
	return out
}

func (n *node) alpha() pluginEntry {
	return pluginEntry{name: "alpha", path: bins.alpha, config: map[string]any{"ports": n.portsConfig(), "punt": puntIP}}
}

func (n *node) beta(extra map[string]any) pluginEntry {
	c := map[string]any{"ports": n.portsConfig(), "foreignTable": "alpha.l2", "foreignPort": n.pods[0].hostIf, "probe": true}
	for k, v := range extra {
		c[k] = v
	}
	return pluginEntry{name: "beta", path: bins.beta, config: c}
}

// writeConfig writes the agent config enabling plugins in order.
func (n *node) writeConfig(plugins ...pluginEntry) {
	n.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "nodeName: itest-node\nbridge: {name: br-int, datapathType: netdev}\n")
	fmt.Fprintf(&b, "ovs: {dbSocket: %q, runDir: %q}\n", n.sw.DBSock, n.sw.Dir)
	fmt.Fprintf(&b, "runDir: %q\nsocketDir: %q\nlogLevel: debug\nhealthInterval: 200ms\n", n.dir, n.dir)
	fmt.Fprintf(&b, "node: {podCIDRs: [10.0.0.0/24], mtu: 1500}\nlimits: {maxFlows: 300000, maxBatch: 20000, requestsPerSecond: 1000, burst: 2000}\nplugins:\n")
	for _, p := range plugins {
		cfg, err := json.Marshal(p.config)
		if err != nil {
			n.t.Fatal(err)
		}
		// JSON is YAML: the section keeps its key case.
		fmt.Fprintf(&b, "  - name: %s\n    path: %s\n    config: %s\n", p.name, p.path, cfg)
		if len(p.args) > 0 {
			args, _ := json.Marshal(p.args)
			fmt.Fprintf(&b, "    args: %s\n", args)
		}
	}
	if err := os.WriteFile(n.cfgPath, []byte(b.String()), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// startAgent runs switchyard-agent and waits until every named plugin synced.
func (n *node) startAgent(synced ...string) {
	n.t.Helper()
	p, err := testenv.StartProcess(testenv.ProcessSpec{Name: "switchyard-agent", Path: bins.agent, Args: []string{"--config", n.cfgPath}, Dir: n.dir})
	if err != nil {
		n.t.Fatal(err)
	}
	n.agent = p
	n.t.Cleanup(func() { p.Stop(10 * time.Second) })
	n.waitSynced(synced...)
}

func (n *node) stopAgent(kill bool) {
	n.t.Helper()
	if kill {
		n.agent.Kill()
	} else {
		n.agent.Stop(10 * time.Second)
	}
	<-n.agent.Done()
}

type pluginStatus struct {
	Name       string  `json:"name"`
	State      string  `json:"state"`
	Version    string  `json:"version"`
	APIVersion int     `json:"apiVersion"`
	PID        int     `json:"pid"`
	Restarts   int     `json:"restarts"`
	Flows      int     `json:"flows"`
	Prefix     uint16  `json:"cookiePrefix"`
	Round      uint16  `json:"round"`
	LastError  string  `json:"lastError"`
	SyncMillis float64 `json:"syncMillis"`
}

type tableStatus struct {
	Pipeline, Stage, Table, Owner string
	ID                            uint8
	Exported                      bool
	Miss                          string
	Flows                         int
}

// api GETs path from the agent's introspection socket into v.
func (n *node) api(path string, v any) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(n.dir, "agent.sock"))
		}}}
	resp, err := c.Get("http://agent" + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (n *node) plugins() map[string]pluginStatus {
	n.t.Helper()
	var ps []pluginStatus
	if err := n.api("/v1/plugins", &ps); err != nil {
		n.t.Fatalf("introspection API: %v", err)
	}
	out := map[string]pluginStatus{}
	for _, p := range ps {
		out[p.Name] = p
	}
	return out
}

func (n *node) tables() map[string]tableStatus {
	n.t.Helper()
	var ts []tableStatus
	if err := n.api("/v1/tables", &ts); err != nil {
		n.t.Fatalf("introspection API: %v", err)
	}
	out := map[string]tableStatus{}
	for _, t := range ts {
		out[t.Table] = t
	}
	return out
}

// waitSynced waits until each named plugin reports state synced, and
// returns their statuses. cond, if set, must also hold.
func (n *node) waitSynced(names ...string) map[string]pluginStatus {
	n.t.Helper()
	return n.waitPlugins("plugins "+strings.Join(names, ",")+" synced", func(ps map[string]pluginStatus) error { return nil }, names...)
}

func (n *node) waitPlugins(what string, cond func(map[string]pluginStatus) error, names ...string) map[string]pluginStatus {
	n.t.Helper()
	var last map[string]pluginStatus
	err := testenv.Eventually(what, 60*time.Second, 50*time.Millisecond, func() error {
		if n.agent.Exited() {
			return testenv.Permanent(fmt.Errorf("switchyard-agent exited; log:\n%s", n.agent.Tail(40)))
		}
		var ps []pluginStatus
		if err := n.api("/v1/plugins", &ps); err != nil {
			return err
		}
		last = map[string]pluginStatus{}
		for _, p := range ps {
			last[p.Name] = p
		}
		for _, name := range names {
			p, ok := last[name]
			if !ok {
				return fmt.Errorf("plugin %s not listed (have %v)", name, ps)
			}
			if p.State == "failed" {
				return testenv.Permanent(fmt.Errorf("plugin %s failed: %s; agent log:\n%s", name, p.LastError, n.agent.Tail(40)))
			}
			if p.State != "synced" {
				return fmt.Errorf("plugin %s is %s", name, p.State)
			}
		}
		return cond(last)
	})
	if err != nil {
		n.t.Fatalf("%v\nagent log tail:\n%s", err, n.agent.Tail(30))
	}
	return last
}

// ofFlow is one line of ovs-ofctl dump-flows.
type ofFlow struct {
	Cookie uint64
	Table  int
	Line   string
}

var cookieRe = regexp.MustCompile(`cookie=0x([0-9a-f]+)`)
var tableRe = regexp.MustCompile(`table=(\d+)`)

// dumpFlows is the independent witness: what the switch really holds.
func (n *node) dumpFlows() []ofFlow {
	n.t.Helper()
	out := n.sw.Ofctl(n.t, "--no-stats", "dump-flows", "br-int")
	var fs []ofFlow
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "OFPST_FLOW") || strings.HasPrefix(l, "NXST_FLOW") {
			continue
		}
		f := ofFlow{Line: l}
		if m := cookieRe.FindStringSubmatch(l); m != nil {
			f.Cookie, _ = strconv.ParseUint(m[1], 16, 64)
		}
		if m := tableRe.FindStringSubmatch(l); m != nil {
			f.Table, _ = strconv.Atoi(m[1])
		}
		fs = append(fs, f)
	}
	return fs
}

// ping sends count pings from pod a to pod b every interval and returns
// how many were transmitted and received. It runs in the background when
// started with pingAsync.
func (n *node) ping(a, b int, count int, interval string) (tx, rx int, out string) {
	out, _ = netns.Exec(n.pods[a].ns, "ping", "-n", "-q", "-c", strconv.Itoa(count), "-i", interval, "-W", "1", n.pods[b].ip)
	return parsePing(out)
}

var pingRe = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

func parsePing(out string) (tx, rx int, s string) {
	m := pingRe.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, out
	}
	tx, _ = strconv.Atoi(m[1])
	rx, _ = strconv.Atoi(m[2])
	return tx, rx, out
}

// pingAsync starts a continuous ping; wait returns its result after it is
// stopped with SIGINT (ping then prints its summary).
type pingRun struct {
	cmd *exec.Cmd
	out *strings.Builder
}

func (n *node) pingAsync(a, b int, interval string) *pingRun {
	n.t.Helper()
	var out strings.Builder
	cmd := exec.Command("ip", "netns", "exec", n.pods[a].ns, "ping", "-n", "-q", "-i", interval, "-W", "1", n.pods[b].ip)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &pingRun{cmd: cmd, out: &out}
}

func (p *pingRun) stop() (tx, rx int, out string) {
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	_ = p.cmd.Wait()
	return parsePing(p.out.String())
}

// waitPing waits until one ping from a to b gets through.
func (n *node) waitPing(what string, a, b int) {
	n.t.Helper()
	err := testenv.Eventually(what, 30*time.Second, 100*time.Millisecond, func() error {
		if _, rx, out := n.ping(a, b, 1, "0.2"); rx != 1 {
			return fmt.Errorf("ping %s -> %s: %s", n.pods[a].ip, n.pods[b].ip, strings.TrimSpace(out))
		}
		return nil
	})
	if err != nil {
		n.t.Fatalf("%v\nflows:\n%s", err, n.sw.Ofctl(n.t, "dump-flows", "br-int"))
	}
}
