package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"switchyard.dev/switchyard/cni/cnipb"
	"switchyard.dev/switchyard/cni/conflist"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
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
	// Enabled lists the plugins to enable, in order; nil means podnet, an
	// empty non-nil list none (only Extra).
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

	// ControlPlane, if set, makes the agent join the cluster as a
	// DaemonSet pod would: a kubeconfig naming the apiserver (forwarded
	// into the node) with a ServiceAccount token bound to the node's agent
	// Pod object (TokenRequest). Its config then holds no pod CIDRs or node
	// IPs: it learns them from its Node. Without it the agent runs static,
	// with the node's pod CIDRs and IP in its config (suites that run no
	// apiserver).
	ControlPlane *controlplane.ControlPlane
	// ServiceAccount is the agent pod's ServiceAccount: the default,
	// AgentServiceAccount, gets the RBAC manifests/rbac.yaml ships; any
	// other name gets none.
	ServiceAccount string
	// NodeName overrides the agent's node name (default: the node's).
	NodeName string
	// Kubeconfig, if set, replaces the kubeconfig the harness writes.
	Kubeconfig string
	// Extra plugins are enabled after Enabled, in order.
	Extra []Plugin
	// HealthPort, if set, serves /readyz and /livez on that TCP port.
	HealthPort int
	// ReadyWait bounds how long an early CNI ADD waits (agent default if 0).
	ReadyWait time.Duration
	// NoWait returns as soon as the agent runs, without waiting for it to
	// serve CNI (for agents that are not meant to get ready).
	NoWait bool
	// Controller, if set, is switchyard-controller's distribution API as
	// the test process reaches it (host:port); it is forwarded into the
	// node and named in the agent config (controller.address), so plugins
	// (netpol) get it in their Start request.
	Controller string
}

// Plugin is an extra plugin to enable.
type Plugin struct {
	Name, Path string
	Args       []string
	// Config is the plugin's section, as YAML flow text (e.g. {a: 1}).
	Config string
}

// Agent is a running switchyard-agent.
type Agent struct {
	Node       *cluster.Node
	Dir        string
	ConfigPath string
	CNISocket  string
	// APISocket serves the agent's introspection API, /readyz and /livez.
	APISocket string
	// TokenFile is the agent's ServiceAccount token (apiserver mode).
	TokenFile string
	Process   *testenv.Process

	bin    string
	noWait bool
}

// Start configures and starts the agent on n and installs CNI there.
func Start(t testenv.T, n *cluster.Node, o Options) *Agent {
	t.Helper()
	if o.Enabled == nil {
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
	a.APISocket = filepath.Join(a.Dir, "sock", "agent.sock")
	nodeName := n.Name
	if o.NodeName != "" {
		nodeName = o.NodeName
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nodeName: %s\n", nodeName)
	fmt.Fprintf(&b, "bridge:\n  name: br-int\n  datapathType: netdev\n")
	fmt.Fprintf(&b, "ovs:\n  dbSocket: %s\n  runDir: %s\n", n.OVS.DBSock, n.OVS.Dir)
	fmt.Fprintf(&b, "runDir: %s\nsocketDir: %s\n", filepath.Join(a.Dir, "run"), filepath.Join(a.Dir, "sock"))
	fmt.Fprintf(&b, "logLevel: %s\n", o.LogLevel)
	if slices.Contains(o.Enabled, "tunnel") {
		// A userspace tunnel needs the node IP on a netdev bridge: the
		// agent moves it from eth0 to br-phy (host/underlay).
		fmt.Fprintf(&b, "underlay:\n  bridge: br-phy\n  interface: eth0\n")
	}
	if o.ControlPlane != nil {
		sa := o.ServiceAccount
		if sa == "" {
			sa = AgentServiceAccount
			grantAgentRBAC(t, o.ControlPlane)
		}
		id := makeIdentity(t, o.ControlPlane, n, a.Dir, sa)
		a.TokenFile = id.tokenFile
		kc := id.kubeconfig
		if o.Kubeconfig != "" {
			kc = o.Kubeconfig
		}
		fmt.Fprintf(&b, "kubeconfig: %s\n", kc)
		if len(o.PodCIDRs) > 0 {
			fmt.Fprintf(&b, "node:\n  podCIDRs: [%s]\n", strings.Join(o.PodCIDRs, ", "))
		}
	} else {
		cidrs := o.PodCIDRs
		if cidrs == nil {
			cidrs = []string{n.PodCIDR.String()}
			if n.PodCIDRv6 != nil {
				cidrs = append(cidrs, n.PodCIDRv6.String())
			}
		}
		fmt.Fprintf(&b, "node:\n  mtu: 1450\n  podCIDRs: [%s]\n  nodeIPs: [%s]\n", strings.Join(cidrs, ", "), n.UnderlayIP)
	}
	if o.Controller != "" {
		forwarded(t, n, inNodeController, o.Controller)
		fmt.Fprintf(&b, "controller:\n  address: %s\n", inNodeController)
	}
	if o.HealthPort != 0 {
		fmt.Fprintf(&b, "health:\n  port: %d\n", o.HealthPort)
	}
	if o.ReadyWait != 0 {
		fmt.Fprintf(&b, "readyWait: %s\n", o.ReadyWait)
	}
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
	for _, p := range o.Extra {
		writePlugin(&b, p)
	}
	a.ConfigPath = filepath.Join(a.Dir, "agent.yaml")
	if err := os.WriteFile(a.ConfigPath, []byte(b.String()), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	a.bin, a.noWait = o.Bins.Agent, o.NoWait
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
	if a.noWait {
		return
	}
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

// Readyz asks the agent's API socket for /readyz: the HTTP status and the
// body (which names what is missing when not ready).
func (a *Agent) Readyz() (int, string, error) { return a.Get("/readyz") }

// Livez asks the agent's API socket for /livez.
func (a *Agent) Livez() (int, string, error) { return a.Get("/livez") }

// Get does GET path on the agent's API socket: status and body.
func (a *Agent) Get(path string) (int, string, error) {
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", a.APISocket)
		}}}
	resp, err := c.Get("http://agent" + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Log returns the agent's whole log so far.
func (a *Agent) Log() string {
	b, _ := os.ReadFile(a.Process.LogPath)
	return string(b)
}

// writePlugin appends one entry of the config's plugins list.
func writePlugin(b *strings.Builder, p Plugin) {
	fmt.Fprintf(b, "- name: %s\n  path: %s\n", p.Name, p.Path)
	if len(p.Args) > 0 {
		// JSON strings are YAML: any argument text survives quoting.
		args, _ := json.Marshal(p.Args)
		fmt.Fprintf(b, "  args: %s\n", args)
	}
	if p.Config != "" {
		fmt.Fprintf(b, "  config: %s\n", p.Config)
	}
}

// Disable removes a plugin from the agent's config and reloads it (SIGHUP),
// as an operator disabling a feature would: the agent unloads it.
func (a *Agent) Disable(t testenv.T, name string) {
	t.Helper()
	b, err := os.ReadFile(a.ConfigPath)
	if err != nil {
		t.Fatalf("disabling %s on %s: %v", name, a.Node.Name, err)
	}
	var out []string
	skipping, found := false, false
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if strings.HasPrefix(l, "- name: ") {
			skipping = strings.TrimSpace(strings.TrimPrefix(l, "- name: ")) == name
			found = found || skipping
		} else if l != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "-") {
			skipping = false // a top-level key after the plugins list
		}
		if !skipping {
			out = append(out, l)
		}
	}
	if !found {
		t.Fatalf("disabling %s on %s: no such plugin in %s", name, a.Node.Name, a.ConfigPath)
	}
	// (A failed write or signal must fail the test: the plugin would
	// stay enabled and the test would go on against the wrong layout.)
	err = os.WriteFile(a.ConfigPath, []byte(strings.Join(out, "")), 0o644)
	if err == nil {
		err = syscall.Kill(a.Process.Pid(), syscall.SIGHUP)
	}
	if err != nil {
		t.Fatalf("disabling %s on %s: %v", name, a.Node.Name, err)
	}
}

// SetConfig sets one key of a plugin's config section (as Options.Config
// wrote it, one key per line) to value and reloads the agent (SIGHUP), as
// an operator changing a feature's config would: the agent restarts the
// plugin with its new config, keeping its flows until it syncs.
func (a *Agent) SetConfig(t testenv.T, name, key string, value any) {
	t.Helper()
	raw, err := os.ReadFile(a.ConfigPath)
	if err != nil {
		t.Fatalf("configuring %s on %s: %v", name, a.Node.Name, err)
	}
	v, err := json.Marshal(value)
	if err != nil {
		t.Fatalf("configuring %s on %s: %s: %v", name, a.Node.Name, key, err)
	}
	lines := strings.SplitAfter(string(raw), "\n")
	in, set := false, false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "- name: "):
			in = strings.TrimSpace(strings.TrimPrefix(l, "- name: ")) == name
		case in && strings.HasPrefix(l, "    "+key+": "):
			lines[i] = fmt.Sprintf("    %s: %s\n", key, v)
			set = true
		}
	}
	if !set {
		t.Fatalf("configuring %s on %s: no key %q in its config section in %s", name, a.Node.Name, key, a.ConfigPath)
	}
	err = os.WriteFile(a.ConfigPath, []byte(strings.Join(lines, "")), 0o644)
	if err == nil {
		err = syscall.Kill(a.Process.Pid(), syscall.SIGHUP)
	}
	if err != nil {
		t.Fatalf("configuring %s on %s: %v", name, a.Node.Name, err)
	}
}

// Enable adds plugins to the end of the agent's config and reloads it
// (SIGHUP), as an operator enabling a feature would.
func (a *Agent) Enable(t testenv.T, ps ...Plugin) {
	t.Helper()
	var b strings.Builder
	for _, p := range ps {
		writePlugin(&b, p)
	}
	f, err := os.OpenFile(a.ConfigPath, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(b.String())
		f.Close()
	}
	if err == nil {
		err = syscall.Kill(a.Process.Pid(), syscall.SIGHUP)
	}
	if err != nil {
		t.Fatalf("enabling plugins on %s: %v", a.Node.Name, err)
	}
}
