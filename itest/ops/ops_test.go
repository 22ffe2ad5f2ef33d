package ops

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/host/agent"
	"switchyard.dev/switchyard/host/yardctl"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

// TestOperability runs one two-node cluster and, on it, the metrics,
// yardctl and trace checks in turn (a cluster per check would cost more
// than the checks).
func TestOperability(t *testing.T) {
	testenv.RequireRoot(t)
	e := start(t)
	n1, n2 := e.c.Nodes[0], e.c.Nodes[1]

	before := e.scrape(t, n1)
	a1 := e.c.AddPod(t, cluster.PodSpec{Name: "a-1", Namespace: "ops", Node: n1})
	b1 := e.c.AddPod(t, cluster.PodSpec{Name: "b-1", Namespace: "ops", Node: n1})
	a2 := e.c.AddPod(t, cluster.PodSpec{Name: "a-2", Namespace: "ops", Node: n2})
	for _, ns := range []string{b1.NetNS, a2.NetNS} {
		probe.Serve(t, ns, 80)
		probe.Serve(t, ns, denyPort)
	}

	t.Run("metrics move with work", func(t *testing.T) {
		after := e.scrape(t, n1)
		for _, c := range []struct {
			name   string
			labels map[string]string
			grow   bool // must have grown since before the pods
			zero   bool // may be 0 (exposed is enough)
		}{
			{"switchyard_agent_cni_request_duration_seconds", map[string]string{"verb": "ADD", "result": "ok"}, true, false},
			{"switchyard_agent_plugin_batches_total", map[string]string{"plugin": "podnet", "result": "applied"}, true, false},
			{"switchyard_agent_plugin_batch_operations_total", map[string]string{"plugin": "podnet"}, true, false},
			{"switchyard_agent_plugin_batch_duration_seconds", map[string]string{"plugin": "podnet"}, true, false},
			{"switchyard_agent_plugin_flows", map[string]string{"plugin": "podnet"}, true, false},
			{"switchyard_agent_plugin_flows", map[string]string{"plugin": "warden"}, false, false},
			{"switchyard_agent_plugin_restarts_total", map[string]string{"plugin": "tunnel"}, false, true},
			{"switchyard_agent_plugin_start_to_synced_seconds", map[string]string{"plugin": "tunnel"}, false, false},
			{"switchyard_agent_plugin_state", map[string]string{"plugin": "warden", "state": "synced"}, false, false},
			{"switchyard_agent_ovs_connected", nil, false, false},
			// warden's own metrics, labelled by the host.
			{"warden_rules", map[string]string{"plugin": "warden", "action": "drop"}, false, false},
			{"warden_scrapes_total", map[string]string{"plugin": "warden"}, true, false},
		} {
			v, ok := value(after, c.name, c.labels)
			if !ok {
				t.Errorf("%s%v: not exposed", c.name, c.labels)
				continue
			}
			v0, _ := value(before, c.name, c.labels)
			switch {
			case c.grow && v <= v0:
				t.Errorf("%s%v = %v, was %v before 3 pods were added: it did not move", c.name, c.labels, v, v0)
			case !c.grow && !c.zero && v <= 0:
				t.Errorf("%s%v = %v, want > 0", c.name, c.labels, v)
			}
		}
		// Its drop flow and its table's miss flow (which the host installs
		// under the table owner's name).
		if v, _ := value(after, "switchyard_agent_plugin_flows", map[string]string{"plugin": "warden"}); v != 2 {
			t.Errorf("warden's flows = %v, want its drop flow and its table's miss flow", v)
		}
	})

	t.Run("yardctl golden", func(t *testing.T) {
		for _, c := range []struct {
			golden string
			args   []string
		}{
			{"tables-podnet.golden", []string{"get", "tables", "--plugin", "podnet"}},
			{"tables-warden.golden", []string{"get", "tables", "--plugin", "warden"}},
			{"flows-warden.golden", []string{"get", "flows", "--plugin", "warden"}},
			{"flows-table-warden.golden", []string{"get", "flows", "--table", "warden.ingress"}},
			{"plugins-warden.golden", []string{"get", "plugins", "--plugin", "warden"}},
		} {
			out, errOut, code := e.yardctl(t, n1, c.args...)
			if code != 0 {
				t.Fatalf("yardctl %v: exit %d: %s", c.args, code, errOut)
			}
			golden(t, c.golden, syncRE.ReplaceAllStringFunc(out, func(m string) string {
				if strings.Contains(m, "SYNC") {
					return "  SYNC  "
				}
				return "  <sync>  "
			}))
		}
	})

	t.Run("yardctl -o json parses", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			into any
		}{
			{[]string{"status"}, &yardctl.Status{}},
			{[]string{"get", "plugins"}, &[]agent.PluginStatus{}},
			{[]string{"get", "tables"}, &[]agent.TableStatus{}},
			{[]string{"get", "resources"}, &[]agent.ResourceStatus{}},
			{[]string{"get", "flows"}, &[]yardctl.Flow{}},
		} {
			out, errOut, code := e.yardctl(t, n1, append(c.args, "-o", "json")...)
			if code != 0 {
				t.Fatalf("yardctl %v: exit %d: %s", c.args, code, errOut)
			}
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			if err := dec.Decode(c.into); err != nil {
				t.Errorf("yardctl %v -o json: %v\n%s", c.args, err, out)
			}
		}
		var s yardctl.Status
		out, _, _ := e.yardctl(t, n1, "status", "-o", "json")
		_ = json.Unmarshal([]byte(out), &s)
		if !s.Ready || len(s.Plugins) != 3 {
			t.Errorf("status: ready=%v with %d plugins, want ready with podnet, tunnel, warden:\n%s", s.Ready, len(s.Plugins), out)
		}
		_, errOut, code := e.yardctl(t, n1, "get", "frobs")
		if code != yardctl.ExitUsage || !strings.Contains(errOut, "plugins, tables, flows, resources, policies or agents") {
			t.Errorf("get frobs: exit %d, stderr %q; want %d and a hint", code, errOut, yardctl.ExitUsage)
		}
	})

	trace := func(t *testing.T, from *cluster.Node, wantCode int, args ...string) yardctl.Trace {
		t.Helper()
		out, errOut, code := e.yardctl(t, from, append(args, "-o", "json", "--peer", n2.Name+"="+e.agents[n2.Name].APISocket,
			"--peer", n1.Name+"="+e.agents[n1.Name].APISocket)...)
		if code != wantCode {
			t.Fatalf("yardctl %v: exit %d, want %d: %s\n%s", args, code, wantCode, errOut, out)
		}
		var tr yardctl.Trace
		if err := json.Unmarshal([]byte(out), &tr); err != nil {
			t.Fatalf("trace -o json: %v\n%s", err, out)
		}
		if len(tr.Nodes) == 0 {
			t.Fatalf("trace on no node:\n%s", out)
		}
		table, _, _ := e.yardctl(t, from, append(args, "--peer", n2.Name+"="+e.agents[n2.Name].APISocket)...)
		t.Logf("yardctl %s\n%s", strings.Join(args, " "), table)
		return tr
	}
	plugins := func(h []agent.TraceHop) map[string]bool {
		m := map[string]bool{}
		for _, x := range h {
			m[x.TableOwner] = true
		}
		return m
	}

	t.Run("trace same node: delivered", func(t *testing.T) {
		b1Port := portOf(t, e, b1.Key())
		txBefore := portTx(t, n1, b1Port)
		tr := trace(t, n1, 0, "trace", "--from", a1.Key(), "--to", b1.IP().String(), "--port", "80")
		// The injected packet was stopped above the output flow: b-1's
		// port sent nothing (ovs-ofctl dump-ports as the witness).
		if tx := portTx(t, n1, b1Port); tx != txBefore {
			t.Errorf("b-1's port %s sent %d packets during the trace: the trace packet reached the pod", b1Port, tx-txBefore)
		}
		if len(tr.Nodes) != 1 || tr.Outcome != agent.VerdictDelivered {
			t.Fatalf("outcome %s on %d nodes, want delivered on 1", tr.Outcome, len(tr.Nodes))
		}
		v := tr.Nodes[0].Verdicts[0]
		if v.Pod != b1.Key() {
			t.Errorf("delivered to %q, want %s", v.Pod, b1.Key())
		}
		if p := plugins(tr.Nodes[0].Hops); !p["podnet"] || !p["warden"] {
			t.Errorf("hops through tables of %v, want podnet's and warden's", p)
		}
		if d := tr.Nodes[0].Datapath; d == nil || !d.Confirmed {
			t.Errorf("the injected packet did not confirm the trace: %+v\nagent log:\n%s", d, e.agents[n1.Name].Process.Tail(15))
		}
	})

	t.Run("trace across nodes: tunnel, then delivered on the peer", func(t *testing.T) {
		tr := trace(t, n1, 0, "trace", "--from", a1.Key(), "--to", a2.IP().String(), "--port", "80")
		if len(tr.Nodes) != 2 {
			t.Fatalf("trace crossed %d nodes, want 2: %+v", len(tr.Nodes), tr)
		}
		first, second := tr.Nodes[0], tr.Nodes[1]
		if first.Node != n1.Name || second.Node != n2.Name {
			t.Errorf("nodes %s, %s; want %s, %s", first.Node, second.Node, n1.Name, n2.Name)
		}
		if v := first.Verdicts[0]; v.Kind != agent.VerdictTunnel || v.Node != n2.Name || v.TunnelTo != n2.UnderlayIP.String() {
			t.Errorf("first node: %+v, want the tunnel toward %s (%s)", v, n2.Name, n2.UnderlayIP)
		}
		if !plugins(first.Hops)["tunnel"] {
			t.Errorf("first node's hops do not cross a tunnel-owned table: %+v", first.Hops)
		}
		if tr.Outcome != agent.VerdictDelivered || second.Verdicts[0].Pod != a2.Key() {
			t.Errorf("second node: %+v, want delivered to %s", second.Verdicts, a2.Key())
		}
		for _, n := range tr.Nodes {
			if d := n.Datapath; d == nil || !d.Confirmed {
				t.Errorf("%s: the injected packet did not confirm the trace: %+v", n.Node, d)
			}
		}
	})

	t.Run("trace of a drop names plugin, table and rule; nothing reaches the pod", func(t *testing.T) {
		before := wardenPackets(t, n1)
		tr := trace(t, n1, yardctl.ExitNotDelivered, "trace", "--from", a1.Key(), "--to", b1.IP().String(), "--port", "9")
		if tr.Outcome != agent.VerdictDropped {
			t.Fatalf("outcome %s, want dropped", tr.Outcome)
		}
		v := tr.Nodes[0].Verdicts[0]
		want := agent.TraceVerdict{Kind: agent.VerdictDropped, Plugin: "warden", Table: "warden.ingress", Description: `policy "itest/deny-9" ingress rule 0: drop tcp/9`}
		if v.Kind != want.Kind || v.Plugin != want.Plugin || v.Table != want.Table || v.Description != want.Description {
			t.Errorf("verdict %+v, want %+v", v, want)
		}
		if d := tr.Nodes[0].Datapath; d == nil || !d.Confirmed || len(d.Reached) != 1 || d.Reached[0] != "warden.ingress(150)" {
			t.Errorf("the injected packet did not come back from warden's table: %+v", d)
		}
		// The interceptors are gone once the trace answered.
		if left := n1.OVS.Ofctl(t, "dump-flows", "br-int", "cookie=0xfffe000000000000/0xffff000000000000"); strings.Contains(left, "cookie=") {
			t.Errorf("trace interceptors left on br-int:\n%s", left)
		}
		// The injected packet was stopped just above warden's drop flow,
		// which thus counted nothing.
		if after := wardenPackets(t, n1); after != before {
			t.Errorf("warden's drop flow counted %d packets during the trace (was %d): the interceptor did not stop the trace packet", after, before)
		}
		// And the verdicts agree with real packets (ovs-ofctl as the
		// independent witness of which flow dropped them).
		if err := probe.Check(a1.NetNS, probe.TCP, b1.IP(), denyPort, 2*time.Second); err == nil {
			t.Errorf("a real TCP connection to %s:%d went through, but the trace said dropped", b1.IP(), denyPort)
		}
		if wardenPackets(t, n1) == before {
			t.Errorf("the real SYN to port %d was not dropped by warden's flow", denyPort)
		}
		if err := probe.Check(a1.NetNS, probe.TCP, b1.IP(), 80, 5*time.Second); err != nil {
			t.Errorf("a real TCP connection to %s:80 failed, but the trace said delivered: %v", b1.IP(), err)
		}
		if err := probe.Check(a1.NetNS, probe.TCP, a2.IP(), 80, 5*time.Second); err != nil {
			t.Errorf("a real TCP connection to %s:80 across nodes failed, but the trace said delivered: %v", a2.IP(), err)
		}
	})

	t.Run("trace errors say what to do", func(t *testing.T) {
		_, errOut, code := e.yardctl(t, n1, "trace", "--from", "ops/nope", "--to", "10.0.0.1", "--port", "80")
		if code != yardctl.ExitUsage || !strings.Contains(errOut, `pod "ops/nope" has no interface on node`) {
			t.Errorf("unknown pod: exit %d, stderr %q", code, errOut)
		}
		_, errOut, code = e.yardctl(t, n1, "trace", "--from", a1.Key(), "--to", b1.IP().String())
		if code != yardctl.ExitUsage || !strings.Contains(errOut, "dstPort") {
			t.Errorf("no port: exit %d, stderr %q", code, errOut)
		}
	})

	t.Run("trace moves warden's description counter", func(t *testing.T) {
		if v, ok := value(e.scrape(t, n1), "warden_flow_descriptions_total", map[string]string{"plugin": "warden"}); !ok || v == 0 {
			t.Errorf("warden_flow_descriptions_total = %v (exposed %v), want > 0 after traces", v, ok)
		}
	})

	t.Run("NodeAgent shows the plugins, Ready and a heartbeat", func(t *testing.T) {
		err := testenv.Eventually("NodeAgent "+n1.Name+" with 3 synced plugins and Ready", 30*time.Second, 200*time.Millisecond, func() error {
			na, err := e.nodeAgent(n1.Name)
			if err != nil {
				return err
			}
			if c, ok := ready(na); !ok || c.Status != "True" {
				return fmt.Errorf("Ready condition %+v", c)
			}
			for _, name := range []string{"podnet", "tunnel", "warden"} {
				p, err := plugin(na, name)
				if err != nil {
					return err
				}
				if p.State != "synced" || p.Flows == 0 || len(p.Tables) == 0 {
					return fmt.Errorf("plugin %+v", p)
				}
			}
			if na.Status.Heartbeat.IsZero() || na.Status.Node.PodCIDRs[0] != n1.PodCIDR.String() {
				return fmt.Errorf("heartbeat %v, node %+v", na.Status.Heartbeat, na.Status.Node)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("yardctl agents lists every node's NodeAgent", func(t *testing.T) {
		out, errOut, code := e.yardctl(t, n1, "agents", "--kubeconfig", e.cp.Kubeconfig, "-o", "json")
		if code != 0 {
			t.Fatalf("yardctl agents: exit %d: %s", code, errOut)
		}
		var nas []crdv1.NodeAgent
		if err := json.Unmarshal([]byte(out), &nas); err != nil {
			t.Fatalf("yardctl agents -o json: %v\n%s", err, out)
		}
		if len(nas) != 2 || nas[0].Name != n1.Name || nas[1].Name != n2.Name {
			t.Errorf("agents %v, want %s and %s", nas, n1.Name, n2.Name)
		}
		table, _, _ := e.yardctl(t, n1, "get", "agents", "--kubeconfig", e.cp.Kubeconfig)
		if !strings.Contains(table, "podnet=synced,tunnel=synced,warden=synced") {
			t.Errorf("yardctl agents:\n%s", table)
		}
	})

	t.Run("yardctl pipeline draws the live layout", func(t *testing.T) {
		svg := filepath.Join(t.TempDir(), "pipeline.svg")
		out, errOut, code := e.yardctl(t, n1, "pipeline", "--svg", svg)
		t.Logf("yardctl pipeline\n%s", out)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		// warden's table sits between podnet's, and passes on by default.
		if !regexp.MustCompile(`(?m)├─ warden\.\S+\s+warden\s+\d+ flows\s+→ \S+`).MatchString(out) {
			t.Errorf("no warden table with where it goes next in:\n%s", out)
		}
		b, err := os.ReadFile(svg)
		if err != nil {
			t.Fatal(err)
		}
		if err := xml.Unmarshal(b, new(struct{})); err != nil || !strings.Contains(string(b), "podnet") {
			t.Errorf("--svg is not an SVG of the pipeline: %v\n%.300s", err, b)
		}
		js, _, _ := e.yardctl(t, n1, "pipeline", "-o", "json")
		var p yardctl.Pipeline
		if err := json.Unmarshal([]byte(js), &p); err != nil || len(p.Tables) == 0 || len(p.Tables[0].Next) == 0 {
			t.Errorf("pipeline -o json: %v, first table %+v", err, p.Tables)
		}
	})

	t.Run("yardctl supportbundle collects the node and the cluster", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "bundle.tar.gz")
		out, errOut, code := e.yardctl(t, n1, "supportbundle", "-f", path, "--kubeconfig", e.cp.Kubeconfig, "--logs", e.agents[n1.Name].Process.LogPath)
		if code != 0 {
			t.Fatalf("exit %d: %s %s", code, out, errOut)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got[h.Name] = int(h.Size)
		}
		for _, want := range []string{"switchyard/agent/plugins.json", "switchyard/agent/tables.json", "switchyard/agent/metrics.txt",
			"switchyard/flows/podnet.txt", "switchyard/flows/warden.txt", "switchyard/cluster/nodeagents.json", "switchyard/README.txt"} {
			if got[want] == 0 {
				t.Errorf("bundle lacks %s (or it is empty): %v", want, got)
			}
		}
		logs := 0
		for n := range got {
			if strings.HasPrefix(n, "switchyard/logs/") {
				logs++
			}
		}
		if logs != 1 {
			t.Errorf("bundle has %d log files, want the agent's: %v", logs, got)
		}
	})

	t.Run("NodeAgent and metrics show a plugin's restart after kill -9", func(t *testing.T) {
		_, body, err := e.agents[n1.Name].Get("/v1/plugins")
		if err != nil {
			t.Fatal(err)
		}
		var ps []agent.PluginStatus
		if err := json.Unmarshal([]byte(body), &ps); err != nil {
			t.Fatal(err)
		}
		pid := 0
		for _, p := range ps {
			if p.Name == "warden" {
				pid = p.PID
			}
		}
		if pid == 0 {
			t.Fatalf("no warden pid in %s", body)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 warden (pid %d): %v", pid, err)
		}
		err = testenv.Eventually("NodeAgent "+n1.Name+" to show warden restarted and synced", 60*time.Second, 200*time.Millisecond, func() error {
			na, err := e.nodeAgent(n1.Name)
			if err != nil {
				return err
			}
			p, err := plugin(na, "warden")
			if err != nil {
				return err
			}
			if p.Restarts != 1 || p.State != "synced" {
				return fmt.Errorf("warden: %+v", p)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v\nagent log:\n%s", err, e.agents[n1.Name].Process.Tail(20))
		}
		if v, _ := value(e.scrape(t, n1), "switchyard_agent_plugin_restarts_total", map[string]string{"plugin": "warden"}); v != 1 {
			t.Errorf("switchyard_agent_plugin_restarts_total{plugin=warden} = %v, want 1", v)
		}
	})

}

// portOf is the OVS port (the host end of the veth) of a pod, from its
// CNI result.
func portOf(t *testing.T, e *env, pod string) string {
	t.Helper()
	for _, p := range e.c.Pods() {
		if p.Key() != pod || p.Result == nil {
			continue
		}
		for _, i := range p.Result.Interfaces {
			if i.Sandbox == "" {
				return i.Name
			}
		}
	}
	t.Fatalf("no host interface for pod %s", pod)
	return ""
}

// portTx is the "tx pkts" counter of an OVS port (ovs-ofctl dump-ports).
func portTx(t testenv.T, n *cluster.Node, port string) int {
	t.Helper()
	out := n.OVS.Ofctl(t, "dump-ports", "br-int", port)
	m := regexp.MustCompile(`tx pkts=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no tx counter for port %s:\n%s", port, out)
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

// syncRE is the SYNC column of `get plugins`: a duration of varying
// width, which also sets how far the columns around it are padded (the
// header's SYNC too), so the padding on both sides goes with it.
var syncRE = regexp.MustCompile(`\s\s+(SYNC|[0-9.]+(ms|s|µs))\s\s+`)

// wardenPackets is n_packets of warden's drop flow, read with ovs-ofctl.
func wardenPackets(t testenv.T, n *cluster.Node) int {
	t.Helper()
	out := n.OVS.Ofctl(t, "dump-flows", "br-int", "tcp,tp_dst=9")
	m := regexp.MustCompile(`n_packets=(\d+).*tp_dst=9 actions=drop`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("warden's drop flow is not on %s's br-int:\n%s", n.Name, out)
	}
	var v int
	for _, c := range m[1] {
		v = v*10 + int(c-'0')
	}
	return v
}
