package netpolmodel

import (
	"os"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/probe"
)

// TestNetworkPolicy runs every scenario on one model, then the stateful,
// restart and outage cases. NETPOL_SCENARIOS=a,b limits the scenarios.
func TestNetworkPolicy(t *testing.T) {
	start := time.Now()
	e := Start(t, Options{Nodes: modelNodes()})
	t.Logf("model up in %s; placement: %s", time.Since(start).Round(time.Millisecond), e.Placement())
	e.Check(t, "no policy", probe.TCP, 80, e.NewReachability(true), 30*time.Second)
	only := map[string]bool{}
	if s := os.Getenv("NETPOL_SCENARIOS"); s != "" {
		for _, n := range strings.Split(s, ",") {
			only[n] = true
		}
	}
	for _, sc := range scenarios {
		if len(only) > 0 && !only[sc.name] {
			continue
		}
		t.Run(sc.name, func(t *testing.T) { runScenario(t, e, sc) })
	}
	for _, c := range cases {
		if len(only) > 0 && !only[c.name] {
			continue
		}
		t.Run(c.name, func(t *testing.T) { c.run(t, e) })
	}
}

// modelNodes is how many nodes the model spreads over: pods go round-robin,
// so every pair of namespaces has pods on the same node and on another
// (egress is enforced at the source node, ingress at the destination).
func modelNodes() int { return 2 }

// cases are the tests beyond truth tables.
var cases []struct {
	name string
	run  func(t *testing.T, e *Env)
}
