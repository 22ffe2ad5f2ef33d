package kit_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"switchyard.dev/switchyard/itest/kit"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

const (
	alpha = testenv.Module + "/plugins/testplugins/alpha"
	beta  = testenv.Module + "/plugins/testplugins/beta"
)

// TestStartNodeRejectsBadOptions: bad options fail before anything is
// built or started, with a message naming the plugin and the fix.
func TestStartNodeRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plugin kit.Plugin
		want   []string
	}{
		{"no name", kit.Plugin{Package: alpha}, []string{"Options.Plugins[0] has no Name"}},
		{"no binary", kit.Plugin{Name: "alpha"}, []string{`"alpha"`, "exactly one of Binary", "Package"}},
		{"both", kit.Plugin{Name: "alpha", Binary: "/bin/true", Package: alpha}, []string{`"alpha"`, "exactly one of Binary"}},
		{"config not an object", kit.Plugin{Name: "alpha", Package: alpha, Config: []int{1}}, []string{`"alpha"`, "JSON object", "[1]"}},
		{"config not JSON", kit.Plugin{Name: "alpha", Package: alpha, Config: map[string]any{"c": make(chan int)}}, []string{`"alpha"`, "does not encode to JSON"}},
		{"podnet twice", kit.Plugin{Name: "podnet", Package: alpha}, []string{`plugin "podnet" is enabled twice`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := testenv.CaptureFatal(func(tt testenv.T) {
				kit.StartNode(tt, kit.Options{WithPodnet: true, Plugins: []kit.Plugin{tc.plugin}})
			})
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("StartNode message %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// TestNodeWiresPodsAndShowsFlows starts podnet, and beside it beta told
// its name by Args, adds two pods by CNI and checks that they talk, that
// Probe tells a dropped packet apart, and that the agent's record of
// podnet's flows is what the switch holds.
func TestNodeWiresPodsAndShowsFlows(t *testing.T) {
	n := kit.StartNode(t, kit.Options{WithPodnet: true, Plugins: []kit.Plugin{
		// beta -name NAME describes itself as NAME: it syncs only if the
		// arguments arrive as given.
		{Name: "bare-x", Package: beta, Args: []string{"-name", "bare-x"}},
	}})
	s := n.WaitSynced()
	if p, ok := s.Plugin("bare-x"); !ok || p.State != "synced" {
		t.Errorf("plugin bare-x: %+v, want synced", p)
	}
	a, b := n.AddPod("a"), n.AddPod("b")
	for _, proto := range []kit.Protocol{kit.TCP, kit.UDP, kit.ICMP} {
		if got := n.Probe(a, b, proto, 8080); got != kit.Connected {
			t.Errorf("%s a -> b: %s, want %s", proto, got, kit.Connected)
		}
	}
	// No pod holds this address: nothing answers.
	// (The kit serves the probed port in the target's namespace, so the
	// ghost borrows b's namespace with a port of its own.)
	ip := slices.Clone(b.IP.To4())
	ip[3] += 100
	ghost := &kit.Pod{Name: "ghost", NetNS: b.NetNS, IP: ip}
	if got := n.Probe(a, ghost, kit.TCP, 8081); got != kit.Timeout && got != kit.Unreachable {
		t.Errorf("TCP a -> %s (no such pod): %s, want timeout or unreachable", ghost.IP, got)
	}

	checked := 0
	for _, tbl := range s.Tables {
		if tbl.Owner != "podnet" || tbl.Flows == 0 {
			continue
		}
		agentFlows, switchFlows := n.Flows("podnet", tbl.Table), n.SwitchFlows("podnet", tbl.Table)
		slices.Sort(agentFlows)
		slices.Sort(switchFlows)
		if len(agentFlows) == 0 || !slices.Equal(agentFlows, switchFlows) {
			t.Errorf("table %s: the agent records\n%s\nthe switch holds\n%s", tbl.Table, strings.Join(agentFlows, "\n"), strings.Join(switchFlows, "\n"))
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("podnet owns no table with flows: %+v", s.Tables)
	}
}

// TestPluginConfigErrorNamesPluginAndCleansUp: a plugin that rejects its
// config fails WaitSynced with the plugin's name and its error, and the
// node leaves nothing behind: no namespace, process or directory.
func TestPluginConfigErrorNamesPluginAndCleansUp(t *testing.T) {
	testenv.RequireRoot(t)
	msg := testenv.CaptureFatal(func(tt testenv.T) {
		n := kit.StartNode(tt, kit.Options{Plugins: []kit.Plugin{{Name: "alpha", Package: alpha, Config: map[string]any{"flows": "many"}}}})
		n.WaitSynced("alpha")
	})
	for _, w := range []string{"plugin alpha", "flows"} {
		if !strings.Contains(msg, w) {
			t.Errorf("WaitSynced message does not contain %q:\n%s", w, msg)
		}
	}
	t.Logf("WaitSynced said: %s", firstLine(msg))
	run := testenv.Prefix + testenv.RunID()
	if nss, _ := netns.List(run); len(nss) > 0 {
		t.Errorf("namespaces left behind: %v", nss)
	}
	if ps := testenv.ProcessesOfRun(testenv.RunID()); len(ps) > 0 {
		t.Errorf("processes left behind: %v", ps)
	}
	if dirs, _ := filepath.Glob(filepath.Join(testenv.BaseDir, run+"-*")); len(dirs) > 0 {
		t.Errorf("directories left behind: %v", dirs)
	}
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
