package kit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"switchyard.dev/switchyard/host/agent"
	"switchyard.dev/switchyard/itest/build"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/ovs"
	"switchyard.dev/switchyard/itest/testenv"
)

// Import paths of the in-tree commands a node runs.
const (
	AgentPackage  = testenv.Module + "/host/cmd/switchyard-agent"
	CNIPackage    = testenv.Module + "/cni/cmd/switchyard-cni"
	PodnetPackage = testenv.Module + "/plugins/podnet"
)

// Plugin is one plugin to enable on the node, after podnet.
type Plugin struct {
	// Name is the plugin's name in the agent config; it must be the name
	// the plugin reports in Describe.
	Name string
	// Binary is the path of a built plugin, or Package the Go import path
	// of its main package, which the kit builds (in the current module, or
	// in switchyard.dev/switchyard for in-tree plugins). Exactly one is set.
	Binary, Package string
	// Config is the plugin's config section: any value that encodes to a
	// JSON object (a struct or a map). The plugin gets it as JSON.
	Config any
	// Args are the plugin's command-line arguments.
	Args []string
}

// Options configures StartNode.
type Options struct {
	// Plugins are enabled in order, after podnet.
	Plugins []Plugin
	// WithPodnet enables the in-tree podnet plugin first, so pods can be
	// added (AddPod) and plugins can build on its pipeline.
	WithPodnet bool
	// PodnetConfig adds keys to podnet's config section.
	PodnetConfig map[string]any
	// LogLevel of the agent: debug, info (default), warn or error.
	LogLevel string
}

// Node is one running Switchyard node.
type Node struct {
	// Name is the node's name; NetNS its network namespace (host network).
	Name, NetNS string
	// OVS is the node's switch; its Ofctl/Vsctl/Appctl are witnesses.
	OVS *ovs.Switch
	// Agent is the running switchyard-agent (log, restart, API).
	Agent *nodeagent.Agent

	t       testenv.T
	cluster *cluster.Cluster
	node    *cluster.Node
	plugins []string // every enabled plugin, in config order

	mu      sync.Mutex
	pods    map[string]*Pod
	serving map[string]bool // "pod/port" with probe servers
}

// validate checks o before anything is created, so bad input costs nothing
// and the message names the plugin at fault.
func (o Options) validate() (configs []string, err error) {
	seen := map[string]bool{}
	if o.WithPodnet {
		seen["podnet"] = true
	}
	for i, p := range o.Plugins {
		what := fmt.Sprintf("Options.Plugins[%d] (%q)", i, p.Name)
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("Options.Plugins[%d] has no Name: set it to the name the plugin reports in Describe", i)
		case seen[p.Name]:
			return nil, fmt.Errorf("%s: plugin %q is enabled twice (podnet comes from WithPodnet): give each plugin one entry", what, p.Name)
		case (p.Binary == "") == (p.Package == ""):
			return nil, fmt.Errorf("%s: set exactly one of Binary (a built plugin) or Package (an import path the kit builds)", what)
		}
		seen[p.Name] = true
		cfg := ""
		if p.Config != nil {
			b, err := json.Marshal(p.Config)
			if err != nil {
				return nil, fmt.Errorf("%s: Config does not encode to JSON: %w", what, err)
			}
			if len(b) == 0 || b[0] != '{' {
				return nil, fmt.Errorf("%s: Config must encode to a JSON object (a struct or map), got %s", what, b)
			}
			cfg = string(b)
		}
		configs = append(configs, cfg)
	}
	return configs, nil
}

// StartNode builds the agent, the CNI binary, podnet (WithPodnet) and the
// plugins given by Package, then starts a node: its namespace, OVS and
// switchyard-agent with each plugin's own config section. It returns once
// the agent runs; call WaitSynced before looking at flows. Everything is
// removed on t's cleanup.
func StartNode(t testenv.T, o Options) *Node {
	t.Helper()
	configs, err := o.validate()
	if err != nil {
		t.Fatalf("kit.StartNode: %v", err)
	}
	testenv.RequireRoot(t)
	testenv.LookPath(t, "ovs-vswitchd", "openvswitch-switch")

	pkgs := []string{AgentPackage, CNIPackage}
	if o.WithPodnet {
		pkgs = append(pkgs, PodnetPackage)
	}
	for _, p := range o.Plugins {
		if p.Package != "" {
			pkgs = append(pkgs, p.Package)
		}
	}
	bins := build.Packages(t, pkgs...)

	n := &Node{t: t, pods: map[string]*Pod{}, serving: map[string]bool{}}
	na := nodeagent.Options{
		Bins:     nodeagent.Binaries{Agent: bins["switchyard-agent"], CNI: bins["switchyard-cni"], Plugins: map[string]string{}},
		Enabled:  []string{},
		LogLevel: o.LogLevel,
		// Without podnet nothing serves CNI, so the agent is not awaited
		// on CNI STATUS; WaitSynced waits for the plugins instead.
		NoWait: !o.WithPodnet,
	}
	if o.WithPodnet {
		na.Enabled = []string{"podnet"}
		na.Bins.Plugins["podnet"] = bins["podnet"]
		na.Config = map[string]map[string]any{"podnet": o.PodnetConfig}
		n.plugins = append(n.plugins, "podnet")
	}
	for i, p := range o.Plugins {
		path := p.Binary
		if p.Package != "" {
			path = bins[pathBase(p.Package)]
		}
		na.Extra = append(na.Extra, nodeagent.Plugin{Name: p.Name, Path: path, Args: p.Args, Config: configs[i]})
		n.plugins = append(n.plugins, p.Name)
	}
	n.cluster = cluster.Start(t, cluster.Options{Nodes: 1, StartAgent: func(t testenv.T, cn *cluster.Node) {
		n.Agent = nodeagent.Start(t, cn, na)
	}})
	n.node = n.cluster.Nodes[0]
	n.Name, n.NetNS, n.OVS = n.node.Name, n.node.NetNS, n.node.OVS
	return n
}

func pathBase(importPath string) string {
	return importPath[strings.LastIndex(importPath, "/")+1:]
}

// Status is what the agent reports about its plugins and table layout.
type Status struct {
	Plugins []agent.PluginStatus
	Tables  []agent.TableStatus
}

// Plugin returns the named plugin's status, or false.
func (s Status) Plugin(name string) (agent.PluginStatus, bool) {
	i := slices.IndexFunc(s.Plugins, func(p agent.PluginStatus) bool { return p.Name == name })
	if i < 0 {
		return agent.PluginStatus{}, false
	}
	return s.Plugins[i], true
}

// Table returns the named table's status, or false.
func (s Status) Table(name string) (agent.TableStatus, bool) {
	i := slices.IndexFunc(s.Tables, func(t agent.TableStatus) bool { return t.Table == name })
	if i < 0 {
		return agent.TableStatus{}, false
	}
	return s.Tables[i], true
}

// Status reads the agent's introspection API (/v1/plugins, /v1/tables).
func (n *Node) Status() Status {
	n.t.Helper()
	s, err := n.status()
	if err != nil {
		n.t.Fatalf("kit: status of %s: %v", n.Name, err)
	}
	return s
}

func (n *Node) status() (Status, error) {
	var s Status
	if err := n.getJSON("/v1/plugins", &s.Plugins); err != nil {
		return s, err
	}
	return s, n.getJSON("/v1/tables", &s.Tables)
}

func (n *Node) getJSON(path string, v any) error {
	code, body, err := n.Agent.Get(path)
	if err != nil {
		return fmt.Errorf("agent API %s: %w", path, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("agent API %s: HTTP %d: %s", path, code, strings.TrimSpace(body))
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		return fmt.Errorf("agent API %s: %w", path, err)
	}
	return nil
}

// maxStartRestarts is how often a plugin may restart before it first
// syncs: a plugin under test that keeps failing its start is a failure,
// reported with its last error rather than after the full timeout.
const maxStartRestarts = 3

// SyncTimeout bounds WaitSynced.
var SyncTimeout = 60 * time.Second

// WaitSynced waits until each named plugin (every enabled plugin if none
// is named) has installed its flows and reported Synced. It fails the test
// at once, naming the plugin and its error, if one fails or keeps
// restarting, or if the agent exits.
func (n *Node) WaitSynced(names ...string) Status {
	n.t.Helper()
	s, err := n.waitSynced(names)
	if err != nil {
		n.t.Fatalf("kit: %v\nagent log (%s), last lines:\n%s", err, n.Agent.Process.LogPath, n.Agent.Process.Tail(30))
	}
	return s
}

func (n *Node) waitSynced(names []string) (Status, error) {
	if len(names) == 0 {
		names = n.plugins
	}
	for _, name := range names {
		if !slices.Contains(n.plugins, name) {
			return Status{}, fmt.Errorf("WaitSynced(%q): no such plugin on %s; enabled: %v", name, n.Name, n.plugins)
		}
	}
	var s Status
	err := testenv.Eventually("plugins "+strings.Join(names, ", ")+" synced on "+n.Name, SyncTimeout, 50*time.Millisecond, func() error {
		if n.Agent.Process.Exited() {
			return testenv.Permanent(fmt.Errorf("switchyard-agent on %s exited", n.Name))
		}
		var err error
		if s, err = n.status(); err != nil {
			return err
		}
		for _, name := range names {
			p, ok := s.Plugin(name)
			switch {
			case !ok:
				return fmt.Errorf("plugin %s not listed by the agent yet", name)
			case p.State == "synced":
				continue
			case p.State == "failed":
				return testenv.Permanent(fmt.Errorf("plugin %s failed: %s", name, p.LastError))
			case p.Restarts >= maxStartRestarts:
				return testenv.Permanent(fmt.Errorf("plugin %s restarted %d times without syncing; last error: %s", name, p.Restarts, p.LastError))
			default:
				return fmt.Errorf("plugin %s is %s", name, p.State)
			}
		}
		return nil
	})
	return s, err
}

// Flows returns the flows plugin installed in table, in canonical
// ovs-ofctl text (cookie, table ID, priority, match, actions), as the agent
// records them (/v1/flows). The table may be the plugin's own or one it
// writes into.
func (n *Node) Flows(plugin, table string) []string {
	n.t.Helper()
	id := n.tableID(table)
	var all []string
	if err := n.getJSON("/v1/flows?plugin="+plugin, &all); err != nil {
		n.t.Fatalf("kit: flows of %s: %v", plugin, err)
	}
	var out []string
	for _, f := range all {
		if flowTable(f) == id {
			out = append(out, f)
		}
	}
	return out
}

// tableRe finds the table in a canonical flow's header (before actions,
// which may name tables too); table 0 is left out, as ovs-ofctl does.
var tableRe = regexp.MustCompile(`(?:^|, )table=(\d+), `)

func flowTable(text string) uint8 {
	header, _, _ := strings.Cut(text, "actions=")
	m := tableRe.FindStringSubmatch(header)
	if m == nil {
		return 0
	}
	id, _ := strconv.ParseUint(m[1], 10, 8)
	return uint8(id)
}

// SwitchFlows returns what the switch itself holds for plugin in table:
// `ovs-ofctl dump-flows` filtered by the table's ID and the plugin's cookie
// prefix, without statistics. It is the independent witness for Flows.
func (n *Node) SwitchFlows(plugin, table string) []string {
	n.t.Helper()
	id := n.tableID(table)
	p, ok := n.Status().Plugin(plugin)
	if !ok {
		n.t.Fatalf("kit: SwitchFlows: no plugin %q on %s; enabled: %v", plugin, n.Name, n.plugins)
	}
	filter := fmt.Sprintf("table=%d,cookie=%#x/0xffff000000000000", id, uint64(p.CookiePrefix)<<48)
	out := n.OVS.Ofctl(n.t, "--no-stats", "dump-flows", "br-int", filter)
	var flows []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "NXST_FLOW") && !strings.HasPrefix(l, "OFPST_FLOW") {
			flows = append(flows, l)
		}
	}
	return flows
}

func (n *Node) tableID(table string) uint8 {
	n.t.Helper()
	s := n.Status()
	ts, ok := s.Table(table)
	if !ok {
		var names []string
		for _, t := range s.Tables {
			names = append(names, t.Table)
		}
		n.t.Fatalf("kit: no table %q on %s; the agent's tables are %v", table, n.Name, names)
	}
	return ts.ID
}
