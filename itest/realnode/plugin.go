package realnode

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"switchyard.dev/switchyard/host/yardctl"
	"switchyard.dev/switchyard/itest/testenv"
)

// WithTemplatePlugin does to switchyard.yml what its comments tell an
// operator to do to add the template plugin: uncomment its plugins: entry
// in the agent ConfigMap, giving it config (a YAML flow mapping, e.g.
// "{blockTCPPorts: [2323]}"), and uncomment its init container in the
// agent DaemonSet, which copies the plugin binary into the agent pod's
// extra-plugins volume. The recipe being commented text, this also checks
// that it works as written.
func WithTemplatePlugin(t testenv.T, yml []byte, config string) []byte {
	t.Helper()
	s := string(yml)
	const entry = "      # - name: template\n      #   path: /var/lib/switchyard/extra-plugins/template\n"
	if strings.Count(s, entry) != 1 {
		t.Fatalf("switchyard.yml has no single commented template plugins: entry to enable:\n%s", entry)
	}
	s = strings.Replace(s, entry, "      - name: template\n        path: /var/lib/switchyard/extra-plugins/template\n        config: "+config+"\n", 1)

	// The init container: the commented lines from its "- name:" to the
	// DaemonSet's containers: list.
	const first, end = "        # - name: plugin-template\n", "      containers:\n"
	i := strings.Index(s, first)
	if i < 0 {
		t.Fatalf("switchyard.yml has no commented init container %q to enable", strings.TrimSpace(first))
	}
	j := strings.Index(s[i:], end)
	if j < 0 {
		t.Fatalf("switchyard.yml: no %q after the commented init container", strings.TrimSpace(end))
	}
	block := s[i : i+j]
	var out strings.Builder
	for _, l := range strings.SplitAfter(block, "\n") {
		if l == "" {
			continue
		}
		if !strings.HasPrefix(l, "        # ") {
			t.Fatalf("switchyard.yml: line %q inside the commented init container is not commented as the others", l)
		}
		out.WriteString("        " + strings.TrimPrefix(l, "        # "))
	}
	return []byte(s[:i] + out.String() + s[i+j:])
}

// AgentSocket is the node's agent API socket (the DaemonSet's
// /var/run/switchyard/agent.sock), as the host sees it.
func (n *Node) AgentSocket() string {
	return filepath.Join(n.Private("/run/switchyard"), "agent.sock")
}

// Yardctl runs yardctl against the node's agent, as an operator does on
// the node, and returns its output.
func (n *Node) Yardctl(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := yardctl.NewCommand(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"--socket", n.AgentSocket()}, args...))
	if err := cmd.Execute(); err != nil {
		return out.String(), fmt.Errorf("yardctl %s on %s: %w", strings.Join(args, " "), n.Name, err)
	}
	return out.String(), nil
}

// OVSRunDir is the node's Open vSwitch run directory (the OVS
// DaemonSet's hostPath /var/run/openvswitch) as the host sees it.
func (n *Node) OVSRunDir() string { return n.Private("/run/openvswitch") }

// BrIntFlows dumps the flows of the node's br-int that match filter (an
// ovs-ofctl flow filter, "" for all) with ovs-ofctl, straight from
// ovs-vswitchd's management socket: a witness independent of the agent.
// Each flow is one line of ovs-ofctl's text, without statistics.
func (n *Node) BrIntFlows(filter string) ([]string, error) {
	args := []string{"-O", "OpenFlow15", "--no-stats", "dump-flows", "unix:" + filepath.Join(n.OVSRunDir(), "br-int.mgmt")}
	if filter != "" {
		args = append(args, filter)
	}
	out, err := testenv.Run("ovs-ofctl", args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", n.Name, err)
	}
	var flows []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "NXST_FLOW") && !strings.HasPrefix(l, "OFPST_FLOW") {
			flows = append(flows, l)
		}
	}
	return flows, nil
}
