package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

func writeFile(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadLayers(t *testing.T) {
	dir := t.TempDir()
	plugin := writeFile(t, dir, "plug", "#!/bin/sh\n", 0o755)
	cfg := writeFile(t, dir, "agent.yaml", `
nodeName: node-a
bridge:
  name: br-int
  datapathType: netdev
ovs:
  dbSocket: unix:/tmp/db.sock
  runDir: /tmp/ovs
runDir: /tmp/run
socketDir: /tmp/sock
node:
  podCIDRs: [10.10.1.0/24]
  mtu: 1400
plugins:
  - name: template
    path: `+plugin+`
    limits: {maxFlows: 10}
    config:
      blockTCPPorts: [23, 2323]
`, 0o644)
	t.Setenv("SWITCHYARD_BRIDGE_NAME", "br-env")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	Flags(fs)
	if err := fs.Parse([]string{"--config", cfg, "--node-name", "node-flag"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load("", fs)
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeName != "node-flag" || c.Bridge.Name != "br-env" || c.Bridge.DatapathType != "netdev" || c.Node.MTU != 1400 {
		t.Errorf("layers not applied: node %q bridge %q dp %q mtu %d", c.NodeName, c.Bridge.Name, c.Bridge.DatapathType, c.Node.MTU)
	}
	if c.HealthInterval != time.Second || c.Limits.MaxBatch != 20000 {
		t.Errorf("defaults not applied: %v %d", c.HealthInterval, c.Limits.MaxBatch)
	}
	if diff := cmp.Diff(`{"blockTCPPorts":[23,2323]}`, string(c.Plugins[0].Config)); diff != "" {
		t.Errorf("plugin section (case must be kept) (-want +got):\n%s", diff)
	}
	l := c.EffectiveLimits(c.Plugins[0])
	if l.MaxFlows != 10 || l.MaxBatch != 20000 {
		t.Errorf("effective limits = %+v", l)
	}
	if c.MgmtSocket() != "/tmp/ovs/br-env.mgmt" {
		t.Errorf("mgmt socket %q", c.MgmtSocket())
	}
}

func TestBadConfigListsEveryErrorWithKey(t *testing.T) {
	dir := t.TempDir()
	notExec := writeFile(t, dir, "plain", "x", 0o644)
	cfg := writeFile(t, dir, "agent.yaml", `
bridge:
  datapathType: kernel
ovs:
  dbSocket: /no/scheme
runDir: relative
node:
  podCIDRs: [10.10.1.0/33]
  gatewayMAC: zz
kubeconfig: /does/not/kubeconfig
limits:
  maxBatch: 100000
plugins:
  - name: a
    path: `+notExec+`
  - name: a
  - path: /does/not/exist
`, 0o644)
	_, err := Load(cfg, nil)
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{
		"nodeName: required",
		`bridge.datapathType: "kernel" must be system, netdev or auto`,
		`ovs.dbSocket: "/no/scheme" must start with unix: or tcp:`,
		`runDir: "relative" must be an absolute directory path`,
		`node.podCIDRs[0]: "10.10.1.0/33" is not a CIDR`,
		`node.gatewayMAC: "zz" is not a MAC address`,
		"kubeconfig: stat /does/not/kubeconfig: no such file or directory (set kubeconfig, SWITCHYARD_KUBECONFIG or --kubeconfig",
		"limits.maxBatch: 100000 must be 1-50000",
		"plugins[0].path: " + notExec + " is not an executable file",
		`plugins[1].name: "a" is already used by plugins[0]`,
		"plugins[1].path: required",
		"plugins[2].name: required",
		"plugins[2].path: stat /does/not/exist: no such file or directory",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
}

// In a DaemonSet the node name comes from the downward API as NODE_NAME;
// the config file's nodeName, when set, wins.
func TestNodeNameFromDownwardAPI(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("NODE_NAME", "node-downward")
	for _, tc := range []struct{ name, file, want string }{
		{"env only", "bridge: {name: br-int}\n", "node-downward"},
		{"config wins", "nodeName: node-file\n", "node-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(writeFile(t, dir, "agent.yaml", tc.file, 0o644), nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.NodeName != tc.want {
				t.Errorf("nodeName = %q, want %q", c.NodeName, tc.want)
			}
		})
	}
}

// The underlay bridge is all or nothing, never br-int, and only for the
// userspace datapath.
func TestUnderlayValidation(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"ok", "bridge: {datapathType: netdev}\nunderlay: {bridge: br-phy, interface: eth0}", ""},
		{"half", "bridge: {datapathType: netdev}\nunderlay: {bridge: br-phy}", `underlay: bridge "br-phy" and interface "" must both be set`},
		{"br-int", "bridge: {datapathType: netdev}\nunderlay: {bridge: br-int, interface: eth0}", `underlay.bridge: "br-int" is the integration bridge`},
		{"self", "bridge: {datapathType: netdev}\nunderlay: {bridge: br-phy, interface: br-phy}", `underlay.interface: "br-phy" is the underlay bridge itself`},
		{"system", "bridge: {datapathType: system}\nunderlay: {bridge: br-phy, interface: eth0}", "underlay.bridge: only the netdev (userspace) datapath needs an underlay bridge"},
		// auto: one config for nodes of either datapath, the uplink found
		// by the node IP (NODE_IP from the DaemonSet, or underlay.nodeIP).
		{"auto, netdev", "bridge: {datapathType: netdev}\nunderlay: {bridge: br-phy, interface: auto}", ""},
		{"auto, system (skipped there)", "bridge: {datapathType: system}\nunderlay: {bridge: br-phy, interface: auto}", ""},
		{"auto, node IP from the config", "bridge: {datapathType: netdev}\nunderlay: {bridge: br-phy, interface: auto, nodeIP: 198.18.0.7}", ""},
		{"auto, no node IP", "bridge: {datapathType: netdev}\nunderlay: {bridge: br-phy, interface: auto}", "underlay.interface: auto looks for the interface holding the node IP, but none is known"},
		{"auto, bad node IP", "bridge: {datapathType: netdev}\nunderlay: {bridge: br-phy, interface: auto, nodeIP: node-1}", `underlay.nodeIP: "node-1" is not an IP address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := "198.18.0.1"
			if strings.Contains(tc.name, "no node IP") || strings.Contains(tc.name, "bad node IP") {
				env = ""
			}
			t.Setenv("NODE_IP", env)
			path := writeFile(t, t.TempDir(), "agent.yaml", "nodeName: n1\n"+tc.yaml+"\n", 0o644)
			c, err := Load(path, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid underlay refused: %v", err)
				}
				wantIf, wantIP := "eth0", env
				if strings.HasPrefix(tc.name, "auto") {
					wantIf = "auto"
				}
				if strings.Contains(tc.yaml, "nodeIP:") {
					wantIP = "198.18.0.7"
				}
				if c.Underlay.Bridge != "br-phy" || c.Underlay.Interface != wantIf || (wantIf == "auto" && c.Underlay.NodeIP != wantIP) {
					t.Fatalf("underlay = %+v, want br-phy/%s node IP %q", c.Underlay, wantIf, wantIP)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
