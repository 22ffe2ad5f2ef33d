package netpolmodel

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"switchyard.dev/switchyard/itest/probe"
)

func init() {
	cases = append(cases, struct {
		name string
		run  func(t *testing.T, e *Env)
	}{"policy-on-backends-through-service", policyThroughService})
}

// policyThroughService: a Service whose backends are x/a and x/b, and a
// policy that lets only namespace y into x/a. The service plugin
// translates the ClusterIP before the security stages, so netpol judges
// the real backend: clients in y reach the Service on every attempt,
// clients elsewhere reach it only when x/b is chosen, never through x/a.
// Probed with real connections from every other pod, on both nodes.
func policyThroughService(t *testing.T, e *Env) {
	defer cleanup(t, e)
	vip := e.ServiceClusterIP(t, "x", "web", "x/a", "x/b")
	e.Apply(t, In(Policy("x", "a-from-y", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "y")))))
	e.Check(t, "x/a from y only", probe.TCP, 80, denyInto("x/a", "y/*", "x/a")(e), realizeWait)

	// A denied backend shows as a failed connection. The select group
	// picks a backend per connection, so of 16 connections a client
	// outside y sees some fail (x/a) and some succeed (x/b); a y client
	// sees none fail. Every probe is its own connection, run in parallel.
	const tries = 16
	type tally struct{ ok, failed int }
	results := map[string]*tally{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, from := range e.Names {
		if strings.HasPrefix(from, "x/") {
			continue // x/a and x/b are the backends; x/c is like z
		}
		results[from] = &tally{}
		for range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				err := probe.Check(e.Pods[from].NetNS, probe.TCP, vip, 80, e.opts.ProbeTimeout)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					results[from].ok++
				} else {
					results[from].failed++
				}
			}()
		}
	}
	wg.Wait()
	var bad []string
	for _, from := range slices.Sorted(maps.Keys(results)) {
		tl := results[from]
		switch {
		case strings.HasPrefix(from, "y/") && tl.failed > 0:
			bad = append(bad, fmt.Sprintf("%s: %d of %d connections to the Service failed; y may reach both backends", from, tl.failed, tries))
		case !strings.HasPrefix(from, "y/") && (tl.ok == 0 || tl.failed == 0):
			bad = append(bad, fmt.Sprintf("%s: %d ok, %d failed of %d; want both (x/b allowed, x/a denied)", from, tl.ok, tl.failed, tries))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("policy through the ClusterIP %s:\n%s\n%s", vip, strings.Join(bad, "\n"), e.agentLogs(10))
	}
	t.Logf("ClusterIP %s: %v (ok/failed per client of %d)", vip, fmtTally(results), tries)
}

func fmtTally[T any](m map[string]T) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%+v ", k, m[k])
	}
	return b.String()
}
