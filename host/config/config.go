package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// Config is the agent configuration.
type Config struct {
	NodeName string `mapstructure:"nodeName"`
	Bridge   Bridge `mapstructure:"bridge"`
	// Underlay moves the node IP onto an OVS bridge, as tunnels on the
	// userspace datapath need; empty leaves the node's interfaces alone.
	Underlay Underlay `mapstructure:"underlay"`
	OVS      OVS      `mapstructure:"ovs"`
	// RunDir holds the agent's state file (table layout, cookie prefixes).
	RunDir string `mapstructure:"runDir"`
	// SocketDir holds the agent's local API socket (agent.sock).
	SocketDir string   `mapstructure:"socketDir"`
	Node      Node     `mapstructure:"node"`
	Limits    Limits   `mapstructure:"limits"`
	Plugins   []Plugin `mapstructure:"plugins"`
	LogLevel  string   `mapstructure:"logLevel"`
	// HealthInterval is how often each plugin is pinged.
	HealthInterval time.Duration `mapstructure:"healthInterval"`
	// Kubeconfig is the kubeconfig file the agent reaches the apiserver
	// with when it does not run as a pod (in a pod it uses the in-cluster
	// config). Empty outside a pod: no apiserver, node facts come from
	// node.* only (a static setup).
	Kubeconfig string `mapstructure:"kubeconfig"`
	// TokenFile is the agent's ServiceAccount token, handed to plugins as
	// their cluster credential; empty takes the one the apiserver client
	// uses (the in-cluster token, or the kubeconfig's tokenFile).
	TokenFile  string     `mapstructure:"tokenFile"`
	Controller Controller `mapstructure:"controller"`
	Health     Health     `mapstructure:"health"`
	Metrics    Metrics    `mapstructure:"metrics"`
	// ReadyWait bounds how long a CNI ADD waits for the agent to become
	// ready before it fails with "try again later".
	ReadyWait time.Duration `mapstructure:"readyWait"`
}

// Controller says where switchyard-controller serves its distribution API;
// plugins (netpol) get it with the agent's token.
type Controller struct {
	// Address is host:port; empty when no controller runs.
	Address string `mapstructure:"address"`
	// CAFile is the PEM CA of the controller's serving certificate.
	CAFile string `mapstructure:"caFile"`
}

// Health configures the TCP listener for kubelet's probes; /readyz and
// /livez are always served on the agent's API socket too.
type Health struct {
	// Port is the TCP port; 0 serves no TCP listener.
	Port int `mapstructure:"port"`
	// BindAddress is the address to listen on (default all).
	BindAddress string `mapstructure:"bindAddress"`
}

// Metrics configures the TCP listener for Prometheus (GET /metrics);
// /metrics is always served on the agent's API socket too.
type Metrics struct {
	// Port is the TCP port; 0 serves no TCP listener.
	Port int `mapstructure:"port"`
	// BindAddress is the address to listen on (default all).
	BindAddress string `mapstructure:"bindAddress"`
}

// Bridge is the integration bridge.
type Bridge struct {
	Name string `mapstructure:"name"`
	// DatapathType is system (kernel), netdev (userspace) or auto (the
	// default: system where the OVS kernel module exists, see
	// DetectDatapath). Load resolves auto, so the agent only ever sees
	// system or netdev.
	DatapathType string `mapstructure:"datapathType"`
	// UserspaceTSO (auto, true or false) turns on OVS
	// other_config:userspace-tso-enable when the datapath is netdev, so
	// pods leave TCP segmentation and checksums to the receiving end as on
	// a kernel datapath instead of computing them per packet (ignored on
	// system). auto, the default, turns it on where ovs-vswitchd can also
	// tunnel such packets (Open vSwitch 3.3 and later; 3.1 drops them on
	// Geneve), so that an overlay keeps working; true forces it, for nodes
	// without an overlay. The agent resolves auto when it connects.
	UserspaceTSO string `mapstructure:"userspaceTSO"`
}

// Underlay is the netdev bridge holding the node IP (see host/underlay).
// On the userspace datapath an overlay plugin's tunnel port works only
// when the node IP lives on such a bridge.
type Underlay struct {
	// Bridge is the bridge's name (e.g. br-phy); empty: no underlay bridge.
	Bridge string `mapstructure:"bridge"`
	// Interface is the uplink holding the node IP today (e.g. eth0); it
	// becomes the bridge's port and its addresses move to the bridge.
	// auto: the interface that holds NodeIP (after a first move, the
	// bridge's uplink port), and the underlay is set up on the netdev
	// datapath only, so one config fits nodes of either datapath.
	Interface string `mapstructure:"interface"`
	// NodeIP is the address auto looks for; empty: the NODE_IP
	// environment variable (the DaemonSet's status.hostIP).
	NodeIP string `mapstructure:"nodeIP"`
}

// UnderlayAuto is the underlay.interface value that detects the uplink.
const UnderlayAuto = "auto"

// OVS says where Open vSwitch listens.
type OVS struct {
	// DBSocket is the ovsdb-server endpoint, e.g. unix:/var/run/openvswitch/db.sock.
	DBSocket string `mapstructure:"dbSocket"`
	// RunDir is ovs-vswitchd's run directory, holding <bridge>.mgmt.
	RunDir string `mapstructure:"runDir"`
}

// MgmtSocket is the bridge's OpenFlow management socket.
func (c *Config) MgmtSocket() string { return c.OVS.RunDir + "/" + c.Bridge.Name + ".mgmt" }

// Node holds explicit overrides of the facts the agent learns from its
// Node object (spec.podCIDRs, status.addresses) and uplink (MTU). Leave
// them empty in a cluster.
type Node struct {
	PodCIDRs   []string `mapstructure:"podCIDRs"`
	NodeIPs    []string `mapstructure:"nodeIPs"`
	GatewayIP  string   `mapstructure:"gatewayIP"`
	GatewayMAC string   `mapstructure:"gatewayMAC"`
	MTU        int      `mapstructure:"mtu"`
}

// Limits bound what one plugin may do, so a buggy one cannot starve others.
type Limits struct {
	MaxFlows int `mapstructure:"maxFlows"`
	MaxBatch int `mapstructure:"maxBatch"`
	// RequestsPerSecond bounds host calls (sustained); Burst is the bucket.
	RequestsPerSecond float64 `mapstructure:"requestsPerSecond"`
	Burst             int     `mapstructure:"burst"`
}

// Plugin enables one plugin.
type Plugin struct {
	Name string   `mapstructure:"name"`
	Path string   `mapstructure:"path"`
	Args []string `mapstructure:"args"`
	// Limits override the global limits field by field (0 = inherit).
	Limits Limits `mapstructure:"limits"`
	// Config is the plugin's own section, handed to it as JSON. It is read
	// from the YAML file directly so key case is preserved.
	Config json.RawMessage `mapstructure:"-"`
}

// EffectiveLimits merges the plugin's limits over the global ones.
func (c *Config) EffectiveLimits(p Plugin) Limits {
	l := c.Limits
	if p.Limits.MaxFlows != 0 {
		l.MaxFlows = p.Limits.MaxFlows
	}
	if p.Limits.MaxBatch != 0 {
		l.MaxBatch = p.Limits.MaxBatch
	}
	if p.Limits.RequestsPerSecond != 0 {
		l.RequestsPerSecond = p.Limits.RequestsPerSecond
	}
	if p.Limits.Burst != 0 {
		l.Burst = p.Limits.Burst
	}
	return l
}

func setDefaults(v *viper.Viper) {
	v.SetDefault("nodeName", "")
	v.SetDefault("bridge.name", "br-int")
	v.SetDefault("bridge.datapathType", DatapathAuto)
	v.SetDefault("bridge.userspaceTSO", "auto")
	v.SetDefault("underlay.bridge", "")
	v.SetDefault("underlay.interface", "")
	v.SetDefault("underlay.nodeIP", "")
	v.SetDefault("ovs.dbSocket", "unix:/var/run/openvswitch/db.sock")
	v.SetDefault("ovs.runDir", "/var/run/openvswitch")
	v.SetDefault("runDir", "/var/run/switchyard")
	v.SetDefault("socketDir", "/var/run/switchyard")
	v.SetDefault("node.mtu", 0)
	v.SetDefault("kubeconfig", "")
	v.SetDefault("tokenFile", "")
	v.SetDefault("controller.address", "")
	v.SetDefault("controller.caFile", "")
	v.SetDefault("health.port", 0)
	v.SetDefault("health.bindAddress", "")
	v.SetDefault("metrics.port", 0)
	v.SetDefault("metrics.bindAddress", "")
	v.SetDefault("readyWait", "10s")
	v.SetDefault("node.gatewayIP", "")
	v.SetDefault("node.gatewayMAC", "")
	v.SetDefault("limits.maxFlows", 200000)
	v.SetDefault("limits.maxBatch", 20000)
	v.SetDefault("limits.requestsPerSecond", 200)
	v.SetDefault("limits.burst", 400)
	v.SetDefault("logLevel", "info")
	v.SetDefault("healthInterval", "1s")
}

// Flags registers the agent's flags; Load reads them.
func Flags(fs *pflag.FlagSet) {
	fs.String("config", "", "path of the YAML config file")
	fs.String("node-name", "", "node name (overrides nodeName)")
	fs.String("bridge", "", "integration bridge name (overrides bridge.name)")
	fs.String("datapath-type", "", "system, netdev or auto (overrides bridge.datapathType)")
	fs.String("ovs-db-socket", "", "ovsdb-server endpoint (overrides ovs.dbSocket)")
	fs.String("ovs-run-dir", "", "ovs-vswitchd run directory (overrides ovs.runDir)")
	fs.String("run-dir", "", "agent state directory (overrides runDir)")
	fs.String("socket-dir", "", "agent API socket directory (overrides socketDir)")
	fs.String("log-level", "", "debug, info, warn or error (overrides logLevel)")
	fs.String("kubeconfig", "", "kubeconfig file, when not running as a pod (overrides kubeconfig)")
	fs.Int("health-port", 0, "TCP port serving /readyz and /livez for kubelet probes (overrides health.port)")
	fs.Int("metrics-port", 0, "TCP port serving Prometheus /metrics (overrides metrics.port)")
}

var flagKeys = map[string]string{
	"node-name": "nodeName", "bridge": "bridge.name", "datapath-type": "bridge.datapathType",
	"ovs-db-socket": "ovs.dbSocket", "ovs-run-dir": "ovs.runDir", "run-dir": "runDir",
	"socket-dir": "socketDir", "log-level": "logLevel", "kubeconfig": "kubeconfig", "health-port": "health.port",
	"metrics-port": "metrics.port",
}

// Load reads the config: file (from --config, or path if fs is nil), then
// SWITCHYARD_<KEY> environment variables (e.g. SWITCHYARD_BRIDGE_NAME),
// then flags that were set.
func Load(path string, fs *pflag.FlagSet) (*Config, error) {
	c, err := read(path, fs)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("config %s is invalid:\n%w", path, err)
	}
	return c, nil
}

// LoadUnvalidated is Load without Validate, for a process that reads a few
// keys of the agent's config in a container that has none of the agent's
// files: switchyard-ovs reads the bridge and OVS keys from the same
// ConfigMap, in an image without the plugin binaries the config names
// (validating them there failed every OVS pod).
func LoadUnvalidated(path string) (*Config, error) { return read(path, nil) }

func read(path string, fs *pflag.FlagSet) (*Config, error) {
	v := viper.New()
	setDefaults(v)
	v.SetEnvPrefix("SWITCHYARD")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	if fs != nil {
		if f := fs.Lookup("config"); f != nil && f.Value.String() != "" {
			path = f.Value.String()
		}
		for flag, key := range flagKeys {
			if f := fs.Lookup(flag); f != nil && f.Changed {
				if err := v.BindPFlag(key, f); err != nil {
					return nil, err
				}
			}
		}
	}
	var raw []byte
	if path != "" {
		var err error
		raw, err = os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		v.SetConfigType("yaml")
		if err := v.ReadConfig(strings.NewReader(string(raw))); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
	}
	var c Config
	if err := v.Unmarshal(&c); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if c.NodeName == "" {
		// The DaemonSet passes the node name through the downward API.
		c.NodeName = os.Getenv("NODE_NAME")
	}
	if c.Underlay.NodeIP == "" {
		// And the node IP (status.hostIP), for underlay.interface auto.
		c.Underlay.NodeIP = os.Getenv("NODE_IP")
	}
	if err := pluginSections(raw, &c); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if c.Bridge.DatapathType == DatapathAuto {
		c.Bridge.DatapathType = DetectDatapath(ThisHost())
	}
	return &c, nil
}

// pluginSections reads plugins[i].config with its key case intact (viper
// lower-cases keys) and stores it as JSON.
func pluginSections(raw []byte, c *Config) error {
	if len(raw) == 0 {
		return nil
	}
	var doc struct {
		Plugins []struct {
			Config any `yaml:"config"`
		} `yaml:"plugins"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return err
	}
	for i := range c.Plugins {
		if i >= len(doc.Plugins) || doc.Plugins[i].Config == nil {
			continue
		}
		b, err := json.Marshal(doc.Plugins[i].Config)
		if err != nil {
			return fmt.Errorf("plugins[%d].config: %w", i, err)
		}
		c.Plugins[i].Config = b
	}
	return nil
}

// Validate returns every problem, one per line, each naming its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.NodeName == "" {
		bad("nodeName", "required (the Kubernetes node name; flag --node-name, SWITCHYARD_NODENAME or NODE_NAME from the downward API)")
	}
	if c.Bridge.Name == "" || len(c.Bridge.Name) > 15 {
		bad("bridge.name", "%q must be 1-15 characters (a Linux interface name)", c.Bridge.Name)
	}
	if c.Bridge.DatapathType != DatapathSystem && c.Bridge.DatapathType != DatapathNetdev {
		bad("bridge.datapathType", "%q must be system, netdev or auto", c.Bridge.DatapathType)
	}
	switch c.Bridge.UserspaceTSO {
	case "", "auto", "true", "false":
	default:
		bad("bridge.userspaceTSO", "%q must be auto, true or false", c.Bridge.UserspaceTSO)
	}
	if u := c.Underlay; u.Bridge != "" || u.Interface != "" {
		switch {
		case u.Bridge == "" || u.Interface == "":
			bad("underlay", "bridge %q and interface %q must both be set (e.g. bridge: br-phy, interface: eth0), or neither", u.Bridge, u.Interface)
		case len(u.Bridge) > 15:
			bad("underlay.bridge", "%q must be 1-15 characters (a Linux interface name)", u.Bridge)
		case u.Bridge == c.Bridge.Name:
			bad("underlay.bridge", "%q is the integration bridge; name another one (e.g. br-phy)", u.Bridge)
		case u.Interface == u.Bridge:
			bad("underlay.interface", "%q is the underlay bridge itself; name the uplink that holds the node IP (e.g. eth0)", u.Interface)
		case u.Interface == UnderlayAuto && u.NodeIP == "":
			bad("underlay.interface", "auto looks for the interface holding the node IP, but none is known: set underlay.nodeIP, or pass NODE_IP (the DaemonSet sets it from status.hostIP)")
		case u.Interface == UnderlayAuto:
			if _, err := netip.ParseAddr(u.NodeIP); err != nil {
				bad("underlay.nodeIP", "%q is not an IP address", u.NodeIP)
			}
		case c.Bridge.DatapathType != DatapathNetdev:
			bad("underlay.bridge", "only the netdev (userspace) datapath needs an underlay bridge; the %s datapath tunnels through the kernel, leave underlay empty (or set interface: auto, which is skipped there)", c.Bridge.DatapathType)
		}
	}
	if !strings.HasPrefix(c.OVS.DBSocket, "unix:") && !strings.HasPrefix(c.OVS.DBSocket, "tcp:") {
		bad("ovs.dbSocket", "%q must start with unix: or tcp:", c.OVS.DBSocket)
	}
	for key, dir := range map[string]string{"ovs.runDir": c.OVS.RunDir, "runDir": c.RunDir, "socketDir": c.SocketDir} {
		if dir == "" || !strings.HasPrefix(dir, "/") {
			bad(key, "%q must be an absolute directory path", dir)
		}
	}
	for i, p := range c.Node.PodCIDRs {
		if _, err := netip.ParsePrefix(p); err != nil {
			bad(fmt.Sprintf("node.podCIDRs[%d]", i), "%q is not a CIDR", p)
		}
	}
	for i, a := range c.Node.NodeIPs {
		if _, err := netip.ParseAddr(a); err != nil {
			bad(fmt.Sprintf("node.nodeIPs[%d]", i), "%q is not an IP address", a)
		}
	}
	if c.Node.GatewayIP != "" {
		if _, err := netip.ParseAddr(c.Node.GatewayIP); err != nil {
			bad("node.gatewayIP", "%q is not an IP address", c.Node.GatewayIP)
		}
	}
	if c.Node.GatewayMAC != "" {
		if _, err := net.ParseMAC(c.Node.GatewayMAC); err != nil {
			bad("node.gatewayMAC", "%q is not a MAC address", c.Node.GatewayMAC)
		}
	}
	if c.Node.MTU != 0 && (c.Node.MTU < 576 || c.Node.MTU > 9216) {
		bad("node.mtu", "%d out of range 576-9216 (0 takes the uplink's MTU)", c.Node.MTU)
	}
	if c.Kubeconfig != "" {
		if _, err := os.Stat(c.Kubeconfig); err != nil {
			bad("kubeconfig", "%v (set kubeconfig, SWITCHYARD_KUBECONFIG or --kubeconfig to a readable kubeconfig file)", err)
		}
	}
	if c.Controller.Address != "" {
		if _, _, err := net.SplitHostPort(c.Controller.Address); err != nil {
			bad("controller.address", "%q must be host:port", c.Controller.Address)
		}
	}
	if c.Controller.CAFile != "" {
		if _, err := os.Stat(c.Controller.CAFile); err != nil {
			bad("controller.caFile", "%v", err)
		}
	}
	if c.Health.Port < 0 || c.Health.Port > 65535 {
		bad("health.port", "%d must be 0 (off) or a TCP port", c.Health.Port)
	}
	if c.Metrics.Port < 0 || c.Metrics.Port > 65535 {
		bad("metrics.port", "%d must be 0 (off) or a TCP port", c.Metrics.Port)
	}
	if c.Metrics.Port != 0 && c.Metrics.Port == c.Health.Port {
		bad("metrics.port", "%d is health.port too; give metrics a port of its own", c.Metrics.Port)
	}
	if c.ReadyWait < 0 || c.ReadyWait > 5*time.Minute {
		bad("readyWait", "%v must be between 0 and 5m", c.ReadyWait)
	}
	checkLimits := func(prefix string, l Limits, global bool) {
		if l.MaxFlows < 0 || (global && l.MaxFlows == 0) {
			bad(prefix+"maxFlows", "%d must be positive", l.MaxFlows)
		}
		if l.MaxBatch < 0 || (global && l.MaxBatch == 0) || l.MaxBatch > 50000 {
			bad(prefix+"maxBatch", "%d must be 1-50000 (the switch's atomic bundle limit)", l.MaxBatch)
		}
		if l.RequestsPerSecond < 0 || (global && l.RequestsPerSecond == 0) {
			bad(prefix+"requestsPerSecond", "%v must be positive", l.RequestsPerSecond)
		}
		if l.Burst < 0 {
			bad(prefix+"burst", "%d must not be negative", l.Burst)
		}
	}
	checkLimits("limits.", c.Limits, true)
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("logLevel", "%q must be debug, info, warn or error", c.LogLevel)
	}
	if c.HealthInterval < 100*time.Millisecond {
		bad("healthInterval", "%v is too short (minimum 100ms)", c.HealthInterval)
	}
	names := map[string]int{}
	for i, p := range c.Plugins {
		key := fmt.Sprintf("plugins[%d]", i)
		if p.Name == "" {
			bad(key+".name", "required")
		} else if j, dup := names[p.Name]; dup {
			bad(key+".name", "%q is already used by plugins[%d]", p.Name, j)
		} else {
			names[p.Name] = i
		}
		if p.Path == "" {
			bad(key+".path", "required (the plugin binary)")
		} else if st, err := os.Stat(p.Path); err != nil {
			bad(key+".path", "%v", err)
		} else if st.IsDir() || st.Mode()&0o111 == 0 {
			bad(key+".path", "%s is not an executable file", p.Path)
		}
		checkLimits(key+".limits.", p.Limits, false)
	}
	return errors.Join(errs...)
}
