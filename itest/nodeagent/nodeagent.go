package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"switchyard.dev/switchyard/cni/cnipb"
	"switchyard.dev/switchyard/cni/conflist"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/testenv"
)

// Binaries are the built commands an agent node runs.
type Binaries struct {
	Agent, CNI string
	// Plugins maps plugin name to binary, started in the order of Enabled.
	Plugins map[string]string
}

// Options configures one node's agent.
type Options struct {
	Bins Binaries
	// Enabled lists the plugins to enable, in order (default: podnet).
	Enabled []string
	// LogLevel of the agent (default info).
	LogLevel string
	// PodCIDRs overrides the node's pod CIDRs (e.g. a tiny range to
	// exhaust IPAM).
	PodCIDRs []string
	// MaxFlows, if set, limits every enabled plugin's flows (failure
	// injection: the host refuses the batch that would cross it).
	MaxFlows int
	// Config adds keys to a plugin's config section, by plugin name; each
	// value is written as JSON (which YAML reads).
	Config map[string]map[string]any
}

// Agent is a running switchyard-agent.
type Agent struct {
	Node       *cluster.Node
	Dir        string
	ConfigPath string
	CNISocket  string
	Process    *testenv.Process

	bin string
}

// Start configures and starts the agent on n and installs CNI there.
func Start(t testenv.T, n *cluster.Node, o Options) *Agent {
	t.Helper()
	if len(o.Enabled) == 0 {
		o.Enabled = []string{"podnet"}
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	a := &Agent{Node: n, Dir: filepath.Join(n.Dir, "agent")}
	for _, d := range []string{a.Dir, filepath.Join(a.Dir, "run"), filepath.Join(a.Dir, "sock")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("%v", err)
		}
	}
	a.CNISocket = filepath.Join(a.Dir, "sock", "cni.sock")
	cidrs := o.PodCIDRs
	if cidrs == nil {
		cidrs = []string{n.PodCIDR.String()}
		if n.PodCIDRv6 != nil {
			cidrs = append(cidrs, n.PodCIDRv6.String())
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nodeName: %s\n", n.Name)
	fmt.Fprintf(&b, "bridge:\n  name: br-int\n  datapathType: netdev\n")
	fmt.Fprintf(&b, "ovs:\n  dbSocket: %s\n  runDir: %s\n", n.OVS.DBSock, n.OVS.Dir)
	fmt.Fprintf(&b, "runDir: %s\nsocketDir: %s\n", filepath.Join(a.Dir, "run"), filepath.Join(a.Dir, "sock"))
	fmt.Fprintf(&b, "logLevel: %s\n", o.LogLevel)
	fmt.Fprintf(&b, "node:\n  mtu: 1450\n  podCIDRs: [%s]\n  nodeIPs: [%s]\n", strings.Join(cidrs, ", "), n.UnderlayIP)
	fmt.Fprintf(&b, "plugins:\n")
	for _, name := range o.Enabled {
		path, ok := o.Bins.Plugins[name]
		if !ok {
			t.Fatalf("plugin %q enabled on %s but no binary was built for it", name, n.Name)
		}
		fmt.Fprintf(&b, "- name: %s\n  path: %s\n", name, path)
		if o.MaxFlows != 0 {
			fmt.Fprintf(&b, "  limits:\n    maxFlows: %d\n", o.MaxFlows)
		}
		fmt.Fprintf(&b, "  config:\n    stateDir: %s\n", filepath.Join(n.Dir, name))
		for _, k := range slices.Sorted(maps.Keys(o.Config[name])) {
			v, err := json.Marshal(o.Config[name][k])
			if err != nil {
				t.Fatalf("plugin %s config %s: %v", name, k, err)
			}
			fmt.Fprintf(&b, "    %s: %s\n", k, v)
		}
	}
	a.ConfigPath = filepath.Join(a.Dir, "agent.yaml")
	if err := os.WriteFile(a.ConfigPath, []byte(b.String()), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	a.bin = o.Bins.Agent
	a.Run(t)
	if _, err := conflist.Install(o.Bins.CNI, conflist.Options{ConfDir: n.CNIConfDir, BinDir: n.CNIBinDir, Socket: a.CNISocket}); err != nil {
		t.Fatalf("installing CNI on %s: %v", n.Name, err)
	}
	return a
}

// Run starts the agent process (again, after Stop) and waits until it
// answers CNI STATUS.
func (a *Agent) Run(t testenv.T) {
	t.Helper()
	n := a.Node
	a.Process = n.StartProcess(t, "switchyard-agent", a.bin, []string{"--config", a.ConfigPath})
	err := testenv.Eventually("switchyard-agent on "+n.Name+" to answer CNI STATUS on "+a.CNISocket, 60*time.Second, 100*time.Millisecond, func() error {
		if a.Process.Exited() {
			return testenv.Permanent(fmt.Errorf("switchyard-agent on %s exited:\n%s", n.Name, a.Process.Tail(30)))
		}
		return a.Status()
	})
	if err != nil {
		a.Process.Kill()
		t.Fatalf("%v\nagent log (%s):\n%s", err, a.Process.LogPath, a.Process.Tail(30))
	}
}

// Stop ends the agent with SIGTERM, as a rolling update would; its plugins
// stop with it and the flows stay on the switch.
func (a *Agent) Stop() {
	if a.Process != nil {
		a.Process.Stop(10 * time.Second)
	}
}

// Restart stops the agent and runs it again.
func (a *Agent) Restart(t testenv.T) {
	t.Helper()
	a.Stop()
	a.Run(t)
}

// Status asks the agent's CNI server whether it can serve ADDs now.
func (a *Agent) Status() error {
	if _, err := os.Stat(a.CNISocket); err != nil {
		return err
	}
	cc, err := grpc.NewClient("unix://"+a.CNISocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
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
		return fmt.Errorf("CNI STATUS: %s", e.GetMsg())
	}
	return nil
}
