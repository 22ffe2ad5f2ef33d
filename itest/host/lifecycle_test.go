package host

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/itest/testenv"
)

// The table IDs the layout must give the test plugins (host/pipeline/stages.go):
// stage ranges, first free ID in declaration and config order.
var wantTables = map[string]struct {
	id    uint8
	owner string
	stage string
}{
	"alpha.classifier": {0, "alpha", "Classifier"},
	"alpha.arp":        {20, "alpha", "Output"},
	"alpha.l2":         {130, "alpha", "Switching"},
	"alpha.output":     {200, "alpha", "Output"},
	"beta.guard":       {30, "beta", "Validation"},
	"beta.ingress":     {150, "beta", "IngressSecurity"},
}

func cookiePrefix(c uint64) uint16 { return uint16(c >> 48) }
func cookieRound(c uint64) uint16  { return uint16(c >> 32) }

// withoutCookie is a dump-flows line without its cookie: the flow itself.
func withoutCookie(line string) string { return cookieRe.ReplaceAllString(line, "") }

// flowsOf groups the switch's flows by cookie prefix.
func flowsOf(fs []ofFlow, prefix uint16) []ofFlow {
	var out []ofFlow
	for _, f := range fs {
		if cookiePrefix(f.Cookie) == prefix {
			out = append(out, f)
		}
	}
	return out
}

func probeFlows(fs []ofFlow) []ofFlow {
	var out []ofFlow
	for _, f := range fs {
		if strings.Contains(f.Line, "tcp,tp_dst=") && strings.Contains(f.Line, "table=150") {
			out = append(out, f)
		}
	}
	return out
}

// TestHostLifecycle walks one node through its life; each step builds on
// the previous one, as on a real node: two plugins claim stages and carry
// traffic; a plugin is killed; the agent restarts; ovs-vswitchd restarts; a
// third plugin is hot-loaded and one is unloaded.
func TestHostLifecycle(t *testing.T) {
	n := newNode(t)
	n.writeConfig(n.alpha(), n.beta(nil))
	n.startAgent("alpha", "beta")

	t.Run("plugins claim stages and their flows carry their cookies", func(t *testing.T) {
		tables := n.tables()
		for name, w := range wantTables {
			got, ok := tables[name]
			if !ok || got.ID != w.id || got.Owner != w.owner || got.Stage != w.stage {
				t.Errorf("table %s = %+v, want ID %d owner %s stage %s", name, got, w.id, w.owner, w.stage)
			}
		}
		ps := n.plugins()
		fs := n.dumpFlows()
		for _, name := range []string{"alpha", "beta"} {
			p := ps[name]
			mine := flowsOf(fs, p.Prefix)
			if len(mine) == 0 || len(mine) != p.Flows {
				t.Errorf("%s: switch holds %d flows with cookie prefix %d, agent reports %d", name, len(mine), p.Prefix, p.Flows)
			}
			for _, f := range mine {
				if cookieRound(f.Cookie) != p.Round {
					t.Errorf("%s flow has round %d, want %d: %s", name, cookieRound(f.Cookie), p.Round, f.Line)
				}
				tableOK := false
				for tn, w := range wantTables {
					if w.owner == name && int(w.id) == f.Table {
						tableOK = true
					}
					_ = tn
				}
				if !tableOK {
					t.Errorf("%s flow in table %d, which %s does not own: %s", name, f.Table, name, f.Line)
				}
			}
		}
		if len(fs) != ps["alpha"].Flows+ps["beta"].Flows {
			t.Errorf("switch holds %d flows, plugins %d+%d:\n%v", len(fs), ps["alpha"].Flows, ps["beta"].Flows, fs)
		}
		if ps["alpha"].Version != "1.0.0" || ps["alpha"].APIVersion != 1 {
			t.Errorf("alpha status %+v", ps["alpha"])
		}
	})

	t.Run("packets traverse the pipeline between two namespaces", func(t *testing.T) {
		n.waitPing("first ping from pod a to pod b", 0, 1)
		if tx, rx, out := n.ping(0, 1, 5, "0.05"); tx != 5 || rx != 5 {
			t.Fatalf("ping a->b: %d/%d\n%s", rx, tx, out)
		}
		if tx, rx, out := n.ping(1, 0, 5, "0.05"); tx != 5 || rx != 5 {
			t.Fatalf("ping b->a: %d/%d\n%s", rx, tx, out)
		}
	})

	t.Run("packet-in reaches the owning plugin, its packet-out leaves on the other port", func(t *testing.T) {
		txRe := regexp.MustCompile(`tx pkts=(\d+)`)
		txOf := func(port uint32) int {
			m := txRe.FindStringSubmatch(n.sw.Ofctl(t, "dump-ports", "br-int", fmt.Sprint(port)))
			if m == nil {
				t.Fatalf("no tx counter for port %d", port)
			}
			v, _ := strconv.Atoi(m[1])
			return v
		}
		if _, err := testenv.Run("ip", "-n", n.pods[0].ns, "neigh", "replace", puntIP, "lladdr", "02:00:00:00:00:99", "dev", "eth0"); err != nil {
			t.Fatal(err)
		}
		before := txOf(n.pods[1].ofport)
		_, _ = netnsPing(n.pods[0].ns, puntIP, 3)
		if err := testenv.Eventually("alpha logged 3 packet-ins and re-injected them to pod b", 10*time.Second, 50*time.Millisecond, func() error {
			log, err := os.ReadFile(n.agent.LogPath)
			if err != nil {
				return err
			}
			// The plugin's attributes arrive in any order.
			c := 0
			for _, l := range strings.Split(string(log), "\n") {
				ok := strings.Contains(l, `"msg":"alpha packet-in"`)
				for _, attr := range []string{`"plugin":"alpha"`, `"table":"alpha.classifier"`, `"table_id":0`, `"tag":7`, `"in_port":10`, `"userdata":"alpha-punt"`} {
					ok = ok && strings.Contains(l, attr)
				}
				if ok {
					c++
				}
			}
			if c < 3 {
				return fmt.Errorf("%d packet-in log lines", c)
			}
			if d := txOf(n.pods[1].ofport) - before; d < 3 {
				return fmt.Errorf("port %d sent %d packets since, want >= 3 packet-outs", n.pods[1].ofport, d)
			}
			return nil
		}); err != nil {
			log, _ := os.ReadFile(n.agent.LogPath)
			var lines []string
			for _, l := range strings.Split(string(log), "\n") {
				if strings.Contains(l, "packet") {
					lines = append(lines, l)
				}
			}
			t.Fatalf("%v\npacket log lines:\n%s\ntable 0:\n%s", err, strings.Join(lines, "\n"), n.sw.Ofctl(t, "dump-flows", "br-int", "table=0"))
		}
	})

	t.Run("writing into another plugin's private table is refused", func(t *testing.T) {
		log, err := os.ReadFile(n.agent.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), `plugin \"beta\" may not write into table \"alpha.l2\" (ID 130): it is private to plugin \"alpha\"`) ||
			!strings.Contains(string(log), "foreign table write refused as expected") {
			t.Errorf("agent log lacks the refusal of beta's write into alpha.l2:\n%s", n.agent.Tail(40))
		}
		if strings.Contains(string(log), "was NOT refused") {
			t.Errorf("beta's foreign write went through")
		}
		// alpha created the pod ports without exporting them: beta may
		// match on them but not output to them.
		if want := `which belongs to plugin \"alpha\" and is not exported`; !strings.Contains(string(log), want) ||
			!strings.Contains(string(log), "foreign port output refused as expected") {
			t.Errorf("agent log lacks the refusal of beta's output to alpha's port:\n%s", n.agent.Tail(40))
		}
	})

	t.Run("kill -9 a plugin: no packet lost, it resyncs, stale flows swept", func(t *testing.T) {
		before := n.plugins()["beta"]
		beforeFlows := n.dumpFlows()
		oldProbe := probeFlows(beforeFlows)
		if len(oldProbe) != 1 {
			t.Fatalf("want one probe flow of beta before the kill, got %v", oldProbe)
		}
		pr := n.pingAsync(0, 1, "0.02")
		time.Sleep(300 * time.Millisecond)
		if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 beta (pid %d): %v", before.PID, err)
		}
		after := n.waitPlugins("beta restarted and synced", func(ps map[string]pluginStatus) error {
			if ps["beta"].PID == before.PID || ps["beta"].Restarts < 1 {
				return fmt.Errorf("beta still pid %d, restarts %d", ps["beta"].PID, ps["beta"].Restarts)
			}
			return nil
		}, "beta")["beta"]
		time.Sleep(300 * time.Millisecond)
		tx, rx, out := pr.stop()
		if tx < 10 || rx != tx {
			t.Errorf("continuous ping across the plugin kill lost packets: %d/%d received\n%s", rx, tx, out)
		}
		if after.Round != before.Round+1 {
			t.Errorf("beta round %d -> %d, want +1", before.Round, after.Round)
		}
		fs := n.dumpFlows()
		newProbe := probeFlows(fs)
		if len(newProbe) != 1 || newProbe[0].Line == oldProbe[0].Line {
			t.Errorf("after resync want exactly the new incarnation's probe flow, got %v (old %v)", newProbe, oldProbe)
		}
		// The new incarnation submitted the same flows except its probe:
		// those the switch kept as they were (no cookie change, nothing
		// re-sent), the old probe was swept and the new one installed.
		// Nothing of another round than these two may remain.
		want := map[string]bool{}
		for _, f := range flowsOf(beforeFlows, before.Prefix) {
			if f.Line != oldProbe[0].Line {
				want[withoutCookie(f.Line)] = true
			}
		}
		want[withoutCookie(newProbe[0].Line)] = true
		got := map[string]bool{}
		for _, f := range flowsOf(fs, after.Prefix) {
			got[withoutCookie(f.Line)] = true
			if r := cookieRound(f.Cookie); r != after.Round && r != before.Round {
				t.Errorf("beta flow of round %d (neither %d nor %d) survived the sync: %s", r, before.Round, after.Round, f.Line)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("beta's flows after the resync (-want +got):\n%s", diff)
		}
		if after.Flows != len(got) {
			t.Errorf("agent reports %d beta flows, the switch holds %d", after.Flows, len(got))
		}
	})

	t.Run("restart the agent: flows kept while it is down and re-owned after", func(t *testing.T) {
		before := n.plugins()
		count := len(n.dumpFlows())
		n.stopAgent(true)
		if err := testenv.Eventually("plugin processes exit after the agent died", 10*time.Second, 50*time.Millisecond, func() error {
			for _, p := range before {
				if syscall.Kill(p.PID, 0) == nil {
					return fmt.Errorf("plugin %s (pid %d) still running", p.Name, p.PID)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := len(n.dumpFlows()); got != count {
			t.Errorf("with the agent down the switch holds %d flows, want %d", got, count)
		}
		if tx, rx, out := n.ping(0, 1, 3, "0.05"); rx != tx || tx != 3 {
			t.Errorf("ping with the agent down: %d/%d\n%s", rx, tx, out)
		}
		n.startAgent("alpha", "beta")
		after := n.plugins()
		fs := n.dumpFlows()
		for _, name := range []string{"alpha", "beta"} {
			b, a := before[name], after[name]
			if a.Prefix != b.Prefix || a.Round != b.Round+1 {
				t.Errorf("%s: prefix/round %d/%d -> %d/%d, want same prefix and next round", name, b.Prefix, b.Round, a.Prefix, a.Round)
			}
			for _, f := range flowsOf(fs, a.Prefix) {
				if cookieRound(f.Cookie) != a.Round {
					t.Errorf("%s flow not re-owned (round %d, want %d): %s", name, cookieRound(f.Cookie), a.Round, f.Line)
				}
			}
		}
		tables := n.tables()
		for name, w := range wantTables {
			if tables[name].ID != w.id {
				t.Errorf("after agent restart table %s has ID %d, want %d", name, tables[name].ID, w.id)
			}
		}
		if len(fs) != count {
			t.Errorf("after agent restart the switch holds %d flows, want %d", len(fs), count)
		}
		n.waitPing("ping after agent restart", 0, 1)
	})

	t.Run("restart ovs-vswitchd: flows replayed and traffic resumes", func(t *testing.T) {
		count := len(n.dumpFlows())
		n.sw.RestartVswitchd(t)
		n.sw.AddBridgeWait(t, "br-int")
		if err := testenv.Eventually("flows replayed into the restarted ovs-vswitchd", 30*time.Second, 100*time.Millisecond, func() error {
			if got, err := n.sw.OfctlE("--no-stats", "dump-flows", "br-int"); err != nil {
				return err
			} else if c := strings.Count(got, "cookie="); c != count {
				return fmt.Errorf("switch holds %d flows, want %d", c, count)
			}
			return nil
		}); err != nil {
			t.Fatalf("%v\nagent log:\n%s", err, n.agent.Tail(30))
		}
		n.waitPing("ping after ovs-vswitchd restart", 0, 1)
		n.waitPing("ping back after ovs-vswitchd restart", 1, 0)
	})

	t.Run("hot-load a third plugin: its table lands in its stage", func(t *testing.T) {
		tmpl := pluginEntry{name: "template", path: bins.template, config: map[string]any{"blockTCPPorts": []int{23}}}
		n.writeConfig(n.alpha(), n.beta(nil), tmpl)
		if err := syscall.Kill(n.agent.Pid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		n.waitSynced("alpha", "beta", "template")
		tables := n.tables()
		if got := tables["template.block"]; got.ID != 70 || got.Stage != "EgressSecurity" || got.Owner != "template" {
			t.Errorf("template.block = %+v, want ID 70 in EgressSecurity", got)
		}
		for name, w := range wantTables {
			if tables[name].ID != w.id {
				t.Errorf("hot-load renumbered %s: ID %d, want %d", name, tables[name].ID, w.id)
			}
		}
		// beta.guard's "next table" is now template.block.
		out := n.sw.Ofctl(t, "--no-stats", "dump-flows", "br-int", "table=30")
		if !strings.Contains(out, "goto_table:70") || strings.Contains(out, "goto_table:130") {
			t.Errorf("beta.guard flows not re-pointed to the hot-loaded table 70:\n%s", out)
		}
		if out := n.sw.Ofctl(t, "--no-stats", "dump-flows", "br-int", "table=70"); !strings.Contains(out, "tcp,tp_dst=23 actions=drop") {
			t.Errorf("template's block flow missing from table 70:\n%s", out)
		}
		n.waitPing("ping through the hot-loaded table", 0, 1)
	})

	t.Run("unload a plugin: its flows and tables are removed and jumps re-pointed", func(t *testing.T) {
		tmpl := pluginEntry{name: "template", path: bins.template, config: map[string]any{"blockTCPPorts": []int{23}}}
		prefix := n.plugins()["beta"].Prefix
		n.writeConfig(n.alpha(), tmpl)
		if err := syscall.Kill(n.agent.Pid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		// Unloading is done when the plugin, its tables and its flows are all gone.
		if err := testenv.Eventually("beta unloaded: not listed, no tables, no flows", 30*time.Second, 50*time.Millisecond, func() error {
			if _, ok := n.plugins()["beta"]; ok {
				return fmt.Errorf("beta still listed")
			}
			tables := n.tables()
			for _, name := range []string{"beta.guard", "beta.ingress"} {
				if _, ok := tables[name]; ok {
					return fmt.Errorf("table %s still in the layout", name)
				}
			}
			if left := flowsOf(n.dumpFlows(), prefix); len(left) != 0 {
				return fmt.Errorf("beta's flows left on the switch: %v", left)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// The classifier's "goto IP Validation" now lands on the next stage that has a table.
		if out := n.sw.Ofctl(t, "--no-stats", "dump-flows", "br-int", "table=0"); !strings.Contains(out, "goto_table:70") {
			t.Errorf("classifier not re-pointed past the removed beta.guard:\n%s", out)
		}
		n.waitPing("ping without beta", 0, 1)
	})
}

// netnsPing pings addr from a namespace (replies are not expected).
func netnsPing(ns, addr string, count int) (string, error) {
	return testenv.Run("ip", "netns", "exec", ns, "ping", "-n", "-q", "-c", strconv.Itoa(count), "-i", "0.1", "-W", "1", addr)
}
