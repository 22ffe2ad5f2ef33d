package cni

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"switchyard.dev/switchyard/cni/conflist"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/testenv"
)

// agent is a switchyard-agent running inside a node's namespace, started
// by the shared itest/nodeagent harness.
type agent struct {
	*nodeagent.Agent
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
	// podnet adds keys to podnet's config section.
	podnet map[string]any
}

func startAgent(t testenv.T, n *cluster.Node) { startAgentWith(t, n, agentOptions{}) }

func agentStarter(o agentOptions) func(testenv.T, *cluster.Node) {
	return func(t testenv.T, n *cluster.Node) { startAgentWith(t, n, o) }
}

// startAgentWith starts the agent on the node, waits until it serves CNI,
// and runs the install step (binary, then conflist) into the node's CNI
// directories.
func startAgentWith(t testenv.T, n *cluster.Node, o agentOptions) {
	t.Helper()
	a := &agent{nodeagent.Start(t, n, nodeagent.Options{
		Bins:     nodeagent.Binaries{Agent: bins.agent, CNI: bins.cni, Plugins: map[string]string{"podnet": bins.podnet}},
		LogLevel: "debug", PodCIDRs: o.podCIDRs, MaxFlows: o.maxFlows,
		Config: map[string]map[string]any{"podnet": o.podnet},
	})}
	agentsMu.Lock()
	agents[n] = a
	agentsMu.Unlock()
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
	pid := agentOf(t, n).Process.Pid()
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
	pid := a.Process.Pid()
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
