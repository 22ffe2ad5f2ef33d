package host

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/testenv"
)

// TestForeignSwept puts on br-int what no live plugin owns (a flow of an
// old round of alpha, one with a cookie prefix no plugin has, one with
// cookie 0, a group and a meter), restarts the agent, and checks that once
// every plugin synced they are gone and the log counts them truthfully.
func TestForeignSwept(t *testing.T) {
	testenv.RequireRoot(t)
	n := newNode(t)
	n.writeConfig(n.alpha())
	n.startAgent("alpha")
	prefix := n.plugins()["alpha"].Prefix
	foreign := []string{
		fmt.Sprintf("cookie=%#x,table=1,priority=1,tcp,tp_dst=1,actions=drop", uint64(prefix)<<48|0x77<<32),
		"cookie=0xdead000000000000,table=1,priority=1,tcp,tp_dst=2,actions=drop",
		"cookie=0,table=1,priority=1,tcp,tp_dst=3,actions=drop",
	}
	for _, f := range foreign {
		n.sw.Ofctl(t, "add-flow", "br-int", f)
	}
	n.sw.Ofctl(t, "add-group", "br-int", "group_id=12345,type=all,bucket=actions=drop")
	n.sw.Ofctl(t, "add-meter", "br-int", "meter=999,pktps,band=type=drop,rate=10")

	n.stopAgent(false)
	n.startAgent("alpha")
	err := testenv.Eventually("the foreign flows, group and meter to be swept", 30*time.Second, 100*time.Millisecond, func() error {
		flows := n.sw.Ofctl(t, "--no-stats", "dump-flows", "br-int", "table=1")
		for _, port := range []string{"tp_dst=1", "tp_dst=2", "tp_dst=3"} {
			if strings.Contains(flows, port) {
				return fmt.Errorf("flow with %s still installed:\n%s", port, flows)
			}
		}
		if g := n.sw.Ofctl(t, "dump-groups", "br-int"); strings.Contains(g, "group_id=12345") {
			return fmt.Errorf("group 12345 still there:\n%s", g)
		}
		if m := n.sw.Ofctl(t, "dump-meters", "br-int"); strings.Contains(m, "meter=999") {
			return fmt.Errorf("meter 999 still there:\n%s", m)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, n.agent.Tail(20))
	}
	// Whatever else was swept, the three flows, the group and the meter
	// are counted.
	raw, err := os.ReadFile(n.agent.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, "swept what no plugin owns") {
			line = l
		}
	}
	for _, want := range []string{`"flows":3`, `"cookie_zero_flows":1`, `"groups":1`, `"meters":1`} {
		if !strings.Contains(line, want) {
			t.Errorf("sweep log line %q lacks %s", line, want)
		}
	}
}
