package cni

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"switchyard.dev/switchyard/cni/cnipb"
	"switchyard.dev/switchyard/cni/conflist"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/testenv"
)

// agent is a switchyard-agent running inside a node's namespace.
type agent struct {
	node    *cluster.Node
	dir     string
	cfgPath string
	socket  string
	proc    *testenv.Process
}

var (
	agentsMu sync.Mutex
	agents   = map[*cluster.Node]*agent{}
)

// agentOptions tweak the agent config for one test.
type agentOptions struct {
	podCIDRs []string
	// maxFlows, if set, limits podnet's flows (failure injection).
	maxFlows int
}

func startAgent(t testenv.T, n *cluster.Node) { startAgentWith(t, n, agentOptions{}) }

func agentStarter(o agentOptions) func(testenv.T, *cluster.Node) {
	return func(t testenv.T, n *cluster.Node) { startAgentWith(t, n, o) }
}

// startAgentWith writes the agent config, starts the agent in the node's
// namespace, waits until it serves CNI, and runs the install step
// (binary, then conflist) into the node's CNI directories.
func startAgentWith(t testenv.T, n *cluster.Node, o agentOptions) {
	t.Helper()
	if o.podCIDRs == nil {
		o.podCIDRs = []string{n.PodCIDR.String()}
		if n.PodCIDRv6 != nil {
			o.podCIDRs = append(o.podCIDRs, n.PodCIDRv6.String())
		}
	}
	a := &agent{node: n, dir: filepath.Join(n.Dir, "agent")}
	for _, d := range []string{a.dir, filepath.Join(a.dir, "run"), filepath.Join(a.dir, "sock")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("%v", err)
		}
	}
	a.socket = filepath.Join(a.dir, "sock", "cni.sock")
	var b strings.Builder
	fmt.Fprintf(&b, "nodeName: %s\n", n.Name)
	fmt.Fprintf(&b, "bridge:\n  name: br-int\n  datapathType: netdev\n")
	fmt.Fprintf(&b, "ovs:\n  dbSocket: %s\n  runDir: %s\n", n.OVS.DBSock, filepath.Dir(n.OVS.MgmtSocket("br-int")))
	fmt.Fprintf(&b, "runDir: %s\nsocketDir: %s\n", filepath.Join(a.dir, "run"), filepath.Join(a.dir, "sock"))
	fmt.Fprintf(&b, "logLevel: debug\n")
	fmt.Fprintf(&b, "node:\n  mtu: 1450\n  podCIDRs: [%s]\n", strings.Join(o.podCIDRs, ", "))
	fmt.Fprintf(&b, "plugins:\n- name: podnet\n  path: %s\n", bins.podnet)
	if o.maxFlows != 0 {
		fmt.Fprintf(&b, "  limits:\n    maxFlows: %d\n", o.maxFlows)
	}
	fmt.Fprintf(&b, "  config:\n    stateDir: %s\n", filepath.Join(n.Dir, "podnet"))
	a.cfgPath = filepath.Join(a.dir, "agent.yaml")
	if err := os.WriteFile(a.cfgPath, []byte(b.String()), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	a.start(t)
	if _, err := conflist.Install(bins.cni, conflist.Options{ConfDir: n.CNIConfDir, BinDir: n.CNIBinDir, Socket: a.socket}); err != nil {
		t.Fatalf("installing CNI config on %s: %v", n.Name, err)
	}
	agentsMu.Lock()
	agents[n] = a
	agentsMu.Unlock()
	t.Cleanup(func() { a.stop() })
}

func (a *agent) start(t testenv.T) {
	t.Helper()
	p, err := testenv.StartProcess(testenv.ProcessSpec{
		Name: "switchyard-agent", Path: bins.agent, Args: []string{"--config", a.cfgPath},
		NetNS: a.node.NetNS, Dir: a.dir,
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	a.proc = p
	err = testenv.Eventually("the agent on "+a.node.Name+" to serve CNI STATUS on "+a.socket, 60*time.Second, 100*time.Millisecond, func() error {
		if p.Exited() {
			return testenv.Permanent(fmt.Errorf("agent exited:\n%s", p.Tail(40)))
		}
		return a.status()
	})
	if err != nil {
		p.Kill()
		t.Fatalf("%v\nagent log:\n%s", err, p.Tail(40))
	}
}

// status asks the agent's CNI server whether it can serve ADDs.
func (a *agent) status() error {
	if _, err := os.Stat(a.socket); err != nil {
		return err
	}
	cc, err := grpc.NewClient("unix://"+a.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := cnipb.NewCNIClient(cc).Status(ctx, &cnipb.StatusRequest{
		NetConf: []byte(`{"cniVersion":"1.1.0","name":"switchyard","type":"switchyard-cni"}`)})
	if err != nil {
		return err
	}
	if e := resp.GetError(); e != nil {
		return fmt.Errorf("STATUS: %s", e.GetMsg())
	}
	return nil
}

func (a *agent) stop() {
	if a.proc != nil {
		a.proc.Stop(10 * time.Second)
	}
}

// restart stops the agent (SIGTERM) and starts it again.
func (a *agent) restart(t testenv.T) {
	t.Helper()
	a.stop()
	a.start(t)
}

func agentOf(t testing.TB, n *cluster.Node) *agent {
	agentsMu.Lock()
	defer agentsMu.Unlock()
	a, ok := agents[n]
	if !ok {
		t.Fatalf("no agent started on %s", n.Name)
	}
	return a
}

// pluginPids lists the agent's child processes (its plugins).
func pluginPids(t testing.TB, n *cluster.Node) []int {
	pid := agentOf(t, n).proc.Pid()
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		for _, c := range strings.Fields(string(data)) {
			var cpid int
			fmt.Sscanf(c, "%d", &cpid)
			out = append(out, cpid)
		}
	}
	return out
}

// agentRSSMB returns the resident memory of the agent process and, summed,
// of its plugin processes (its children).
func agentRSSMB(t testing.TB, n *cluster.Node) (agentMB, pluginsMB float64) {
	a := agentOf(t, n)
	pid := a.proc.Pid()
	agentMB, err := rssMB(pid)
	if err != nil {
		t.Fatalf("reading agent RSS: %v", err)
	}
	for _, cpid := range pluginPids(t, n) {
		if mb, err := rssMB(cpid); err == nil {
			pluginsMB += mb
		}
	}
	return agentMB, pluginsMB
}

// loadList reads the conflist the install step wrote.
func loadList(n *cluster.Node) (*libcni.NetworkConfigList, error) {
	return libcni.NetworkConfFromFile(filepath.Join(n.CNIConfDir, conflist.DefaultFileName))
}
