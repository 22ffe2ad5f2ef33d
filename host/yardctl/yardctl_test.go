package yardctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/host/agent"
)

// fakeAgent serves canned answers on a unix socket: the I/O seam yardctl
// talks through (the real agent is exercised in itest/ops).
func fakeAgent(t *testing.T, routes map[string]any) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for path, v := range routes {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			switch v := v.(type) {
			case string:
				if strings.HasPrefix(v, "503 ") {
					http.Error(w, strings.TrimPrefix(v, "503 "), http.StatusServiceUnavailable)
					return
				}
				_, _ = w.Write([]byte(v))
			case func(*http.Request) any:
				_ = json.NewEncoder(w).Encode(v(r))
			default:
				_ = json.NewEncoder(w).Encode(v)
			}
		})
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return sock
}

func run(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := NewCommand(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func exitCode(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	}
	return ExitFailure
}

var plugins = []agent.PluginStatus{
	{Name: "podnet", State: "synced", Version: "1.0.0", Flows: 30, SyncMillis: 12},
	{Name: "warden", State: "restarting", Restarts: 2, LastError: "exited"},
}

func TestGetAndStatus(t *testing.T) {
	sock := fakeAgent(t, map[string]any{
		"GET /v1/plugins": plugins,
		"GET /v1/tables": []agent.TableStatus{
			{ID: 0, Table: "podnet.classifier", Pipeline: "root", Stage: "Classifier", Owner: "podnet", Exported: true, Miss: "drop", Flows: 7},
			{ID: 150, Table: "warden.ingress", Pipeline: "ip", Stage: "IngressSecurity", Owner: "warden", Miss: "next", Flows: 2},
		},
		"GET /v1/flows": func(r *http.Request) any {
			return map[string][]string{"podnet": {"cookie=0x1000100000000, priority=50,ip actions=goto_table:30"},
				"warden": {"cookie=0x3000100000077, table=150, priority=100,tcp,tp_dst=9 actions=drop"}}[r.URL.Query().Get("plugin")]
		},
		"GET /readyz": "503 not ready: plugin \"warden\" is restarting\n",
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"tables of one plugin", []string{"get", "tables", "--plugin", "warden"},
			"ID   TABLE           PIPELINE  STAGE            OWNER   EXPORTED  MISS  FLOWS\n" +
				"150  warden.ingress  ip        IngressSecurity  warden  false     next  2\n"},
		{"flows with their owner", []string{"get", "flows"},
			"PLUGIN  FLOW\npodnet  cookie=0x1000100000000, priority=50,ip actions=goto_table:30\nwarden  cookie=0x3000100000077, table=150, priority=100,tcp,tp_dst=9 actions=drop\n"},
		{"flows of one table", []string{"get", "flows", "--table", "warden.ingress"},
			"PLUGIN  FLOW\nwarden  cookie=0x3000100000077, table=150, priority=100,tcp,tp_dst=9 actions=drop\n"},
		{"flows of table 0", []string{"get", "flows", "--table", "podnet.classifier"},
			"PLUGIN  FLOW\npodnet  cookie=0x1000100000000, priority=50,ip actions=goto_table:30\n"},
		{"status not ready", []string{"status"},
			"READY         no\n" +
				"  not ready:  plugin \"warden\" is restarting\n" +
				"\n" +
				"PLUGIN  STATE       VERSION  RESTARTS  FLOWS  SYNC  LAST ERROR\n" +
				"podnet  synced      1.0.0    0         30     12ms  -\n" +
				"warden  restarting  -        2         0      -     exited\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := run(append([]string{"--socket", sock}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("output (-want +got):\n%s", d)
			}
		})
	}
	t.Run("json and yaml", func(t *testing.T) {
		out, err := run("--socket", sock, "get", "plugins", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var got []agent.PluginStatus
		if err := json.Unmarshal([]byte(out), &got); err != nil || !cmp.Equal(got, plugins) {
			t.Errorf("-o json: %v\n%s", err, out)
		}
		out, err = run("--socket", sock, "get", "plugins", "-o", "yaml")
		if err != nil || !strings.Contains(out, "name: warden") {
			t.Errorf("-o yaml: %v\n%s", err, out)
		}
	})
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no agent", []string{"--socket", "/nonexistent/agent.sock", "status"}, ExitUnreachable, "is switchyard-agent running on this node?"},
		{"bad output", []string{"-o", "xml", "status"}, ExitUsage, "use table, json or yaml"},
		{"bad get", []string{"--socket", "/nonexistent", "get", "frobs"}, ExitUsage, "say plugins, tables, flows, resources, policies or agents"},
		{"trace without a source", []string{"trace", "--to", "10.0.0.1"}, ExitUsage, "--from NAMESPACE/POD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(tc.args...)
			if exitCode(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("exit %d (%v), want %d with %q", exitCode(err), err, tc.code, tc.msg)
			}
		})
	}
}

func TestTraceFollowsTheTunnel(t *testing.T) {
	next := &agent.TraceRequest{FromTunnel: true, TunnelSrc: "198.18.0.1", TunnelDst: "198.18.0.2", DstIP: "10.244.2.2", DstPort: 80}
	var peerGot agent.TraceRequest
	peer := fakeAgent(t, map[string]any{
		"POST /v1/trace": func(r *http.Request) any {
			_ = json.NewDecoder(r.Body).Decode(&peerGot)
			return agent.TraceResult{Node: "node-2", Hops: []agent.TraceHop{{TableID: 0, Table: "podnet.classifier", TableOwner: "podnet", Plugin: "tunnel", Priority: 200}},
				Verdicts: []agent.TraceVerdict{{Kind: agent.VerdictDelivered, Pod: "ops/a-2", Port: "sy1"}}}
		},
	})
	first := fakeAgent(t, map[string]any{
		"POST /v1/trace": agent.TraceResult{Node: "node-1",
			Hops: []agent.TraceHop{
				{TableID: 0, Table: "podnet.classifier", Stage: "root/Classifier", TableOwner: "podnet", Plugin: "podnet", Priority: 50},
				{TableID: 91, Table: "tunnel.l3_forward", Stage: "ip/Routing", TableOwner: "tunnel", Plugin: "tunnel", Priority: 200, Notes: []string{"learn: not modelled"}},
			},
			Verdicts: []agent.TraceVerdict{{Kind: agent.VerdictTunnel, Node: "node-2", TunnelTo: "198.18.0.2", Port: "sy-tun0", Next: next}}},
	})
	out, err := run("--socket", first, "trace", "--from", "ops/a-1", "--to", "10.244.2.2", "--port", "80", "--peer", "node-2="+peer)
	if err != nil {
		t.Fatal(err)
	}
	want := "NODE node-1\n" +
		"#        TABLE                  STAGE            OWNER   FLOW BY  PRIO  DECISION\n" +
		"1        podnet.classifier(0)   root/Classifier  podnet  podnet   50    -\n" +
		"2        tunnel.l3_forward(91)  ip/Routing       tunnel  tunnel   200   learn: not modelled\n" +
		"VERDICT  sent to the tunnel toward node node-2 (198.18.0.2) on port sy-tun0\n" +
		"\n" +
		"NODE node-2\n" +
		"#        TABLE                 STAGE  OWNER   FLOW BY  PRIO  DECISION\n" +
		"1        podnet.classifier(0)  -      podnet  tunnel   200   -\n" +
		"VERDICT  delivered to pod ops/a-2 on port sy1\n"
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("trace (-want +got):\n%s", d)
	}
	wantNext := *next
	wantNext.Inject = true // --inject (the default) carries over to the peer
	if !cmp.Equal(peerGot, wantNext) {
		t.Errorf("the peer got %+v, want the first node's next request %+v", peerGot, wantNext)
	}
	// Without --peer the trace stops at the tunnel and says how to go on.
	out, err = run("--socket", first, "trace", "--from", "ops/a-1", "--to", "10.244.2.2", "--port", "80", "-o", "json")
	var tr Trace
	if err != nil || json.Unmarshal([]byte(out), &tr) != nil || tr.Outcome != agent.VerdictTunnel || !strings.Contains(tr.Unfinished, "--peer node-2=SOCKET") {
		t.Errorf("without --peer: %v\n%s", err, out)
	}
}

func TestTraceDropExitCode(t *testing.T) {
	sock := fakeAgent(t, map[string]any{
		"POST /v1/trace": agent.TraceResult{Node: "node-1", Verdicts: []agent.TraceVerdict{{Kind: agent.VerdictDropped, Plugin: "netpol", Table: "netpol.ingress", Description: `policy "ns/deny" rule 0`}}},
	})
	out, err := run("--socket", sock, "trace", "--from", "ops/a-1", "--to", "10.0.0.1", "--port", "9")
	if exitCode(err) != ExitNotDelivered {
		t.Errorf("exit %d (%v), want %d", exitCode(err), err, ExitNotDelivered)
	}
	if !strings.Contains(out, `dropped by plugin netpol in table netpol.ingress: policy "ns/deny" rule 0`) {
		t.Errorf("output does not name the plugin, table and rule:\n%s", out)
	}
}
