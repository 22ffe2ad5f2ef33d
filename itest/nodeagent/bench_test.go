package nodeagent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/testenv"
)

// BenchmarkAgentJoin measures the figures of the agent joining a cluster:
//
//   - ms_start_to_ready: agent process start to /readyz ok, on a node whose
//     Node object (with its pod CIDR) exists, podnet and three node-event
//     subscribers enabled (each b.N iteration restarts the agent);
//   - node_watches: the apiserver's open WATCH requests on nodes with that
//     one agent running three subscribers (apiserver_longrunning_requests,
//     less those open before the agent started);
//   - rss_MB_1000_nodes and rss_MB_0_nodes: the agent's resident memory
//     with 1,000 other Node objects in the apiserver (all delivered to the
//     subscribers) and, as the baseline in the same run, with none.
func BenchmarkAgentJoin(b *testing.B) {
	nb, obsBin := joinBins(b)
	cp := controlplane.Start(b)
	c := cluster.Start(b, cluster.Options{Nodes: 1})
	n := c.Nodes[0]
	registerNode(b, cp.Client, n.Name, []string{n.PodCIDR.String()}, n.UnderlayIP.String())
	var extra []nodeagent.Plugin
	for i := range 3 {
		extra = append(extra, observer(obsBin, fmt.Sprintf("obs-%d", i), 0, filepath.Join(n.Dir, fmt.Sprintf("obs-%d.jsonl", i)), false))
	}
	base := nodeWatches(b, cp) // the apiserver's own, if any
	a := nodeagent.Start(b, n, nodeagent.Options{Bins: nb, ControlPlane: cp, Extra: extra})
	waitReadyz(b, a, 200, "ok")

	b.ResetTimer()
	var total time.Duration
	for range b.N {
		a.Stop()
		start := time.Now()
		a.Run(b)
		waitReadyz(b, a, 200, "ok")
		total += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms_start_to_ready")
	b.ReportMetric(float64(nodeWatches(b, cp)-base), "node_watches")
	b.ReportMetric(rssMB(b, a.Process.Pid()), "rss_MB_0_nodes")

	createNodes(b, cp, 1000)
	last := filepath.Join(n.Dir, "obs-2.jsonl")
	if err := testenv.Eventually("1000 node-added events at the last subscriber", 5*time.Minute, time.Second, func() error {
		got := 0
		for _, l := range readLines(b, last) {
			if l.Kind == "node-added" && strings.HasPrefix(l.Node, "bench-") {
				got++
			}
		}
		if got < 1000 {
			return fmt.Errorf("%d so far", got)
		}
		return nil
	}); err != nil {
		b.Fatalf("%v", err)
	}
	b.ReportMetric(rssMB(b, a.Process.Pid()), "rss_MB_1000_nodes")
}

// createNodes creates count Node objects with pod CIDRs and InternalIPs,
// 16 at a time, deleted on cleanup.
func createNodes(b *testing.B, cp *controlplane.ControlPlane, count int) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range count {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			name := fmt.Sprintf("bench-%04d", i)
			registerNode(b, cp.Client, name, []string{fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256)}, fmt.Sprintf("172.16.%d.%d", i/250, i%250+1))
		}()
	}
	wg.Wait()
}

// rssMB reads a process's resident set size.
func rssMB(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatalf("%v", err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	b.Fatalf("no VmRSS for pid %d", pid)
	return 0
}
