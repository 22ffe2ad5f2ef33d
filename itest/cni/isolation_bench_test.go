package cni

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/testenv"
)

const (
	// isoBatch is the neighbour's batch: a large policy recompute.
	isoBatch = 20000
	// isoRounds alternate idle and busy blocks of isoBlock pods each, so
	// drift on a shared machine hits both sides alike: 200 ADDs a side,
	// so that p99 is the second-slowest, not the slowest one alone.
	isoRounds = 10
	isoBlock  = 20
)

// BenchmarkCNIIsolation measures CNI ADD latency through switchyard with a
// second plugin (beta) idle, and with it re-applying 20,000-flow batches
// back to back, in the same run. The agent serialises batches per plugin,
// not globally, so podnet's small batch inside an ADD should not queue
// behind the neighbour's; and the neighbour's batch pauses while a pod
// request is in flight (host/agent/cnigate.go), so the ADD does not share
// the CPU with it either. Reported: ADD p50/p99 idle and busy, their
// ratios, and the neighbour's batches per second while busy.
func BenchmarkCNIIsolation(b *testing.B) { benchIsolation(b, nil) }

// BenchmarkCNIIsolationWarm is BenchmarkCNIIsolation with podnet keeping
// 4 warm ports: the ADDs that take one wait on the switch only for their
// flows.
func BenchmarkCNIIsolationWarm(b *testing.B) { benchIsolation(b, map[string]any{"warmPorts": 4}) }

func benchIsolation(b *testing.B, podnet map[string]any) {
	testenv.RequireRoot(b)
	needBins(b)
	if bins.betaErr != nil {
		b.Fatalf("beta did not build: %v", bins.betaErr)
	}
	churnFile := filepath.Join(testenv.Dir(b, "churn"), "on")
	c := cluster.Start(b, cluster.Options{Nodes: 1, StartAgent: func(t testenv.T, n *cluster.Node) {
		a := &agent{nodeagent.Start(t, n, nodeagent.Options{
			Bins:    nodeagent.Binaries{Agent: bins.agent, CNI: bins.cni, Plugins: map[string]string{"podnet": bins.podnet, "beta": bins.beta}},
			Enabled: []string{"podnet", "beta"},
			Config:  map[string]map[string]any{"beta": {"churn": isoBatch, "churnFile": churnFile}, "podnet": podnet},
		})}
		agentsMu.Lock()
		agents[n] = a
		agentsMu.Unlock()
	}})
	n := c.Nodes[0]
	list, err := loadList(n)
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{name: "sy", node: n.NetNS, list: list,
		cfg: libcni.NewCNIConfigWithCacheDir([]string{n.CNIBinDir}, filepath.Join(n.Dir, "bench-cache"), nil)}
	e.diag = func() string { return "agent log tail:\n" + agentOf(b, n).Process.Tail(30) }
	e.pods = make([]string, isoBlock)
	for i := range e.pods {
		e.pods[i] = netns.Create(b, testenv.Name(fmt.Sprintf("iso%d", i)))
	}
	var idle, busy []time.Duration
	var busyBatches int
	var busyTime time.Duration
	// The agent log of each block, to split its ADDs' phases by side.
	logPath := agentOf(b, n).Process.LogPath
	var idleLog, busyLog strings.Builder
	logSince := func(off int64) (string, int64) {
		raw, err := os.ReadFile(logPath)
		if err != nil {
			b.Fatal(err)
		}
		return string(raw[off:]), int64(len(raw))
	}
	var off int64
	b.ResetTimer()
	for range b.N {
		for range isoRounds {
			setChurn(b, churnFile, false)
			_, off = logSince(off)
			e.adds = nil
			e.block(b)
			idle = append(idle, e.adds...)
			text, next := logSince(off)
			idleLog.WriteString(text)
			off = next

			before := setChurn(b, churnFile, true)
			_, off = logSince(off)
			start := time.Now()
			e.adds = nil
			e.block(b)
			busy = append(busy, e.adds...)
			busyTime += time.Since(start)
			busyBatches += churnCount(churnFile) - before
			text, next = logSince(off)
			busyLog.WriteString(text)
			off = next
		}
	}
	b.StopTimer()
	// Where the busy side's extra time goes: each phase's p50 and p99,
	// idle and busy (podnet's phases, and the agent's whole handling).
	for side, text := range map[string]string{"idle": idleLog.String(), "busy": busyLog.String()} {
		for name, ds := range phasesIn(text) {
			b.ReportMetric(ms(pct(ds, 50)), side+"-"+name+"-p50-ms")
			b.ReportMetric(ms(pct(ds, 99)), side+"-"+name+"-p99-ms")
		}
	}
	setChurn(b, churnFile, false)
	b.ReportMetric(ms(pct(idle, 50)), "idle-add-p50-ms")
	b.ReportMetric(ms(pct(idle, 99)), "idle-add-p99-ms")
	b.ReportMetric(ms(pct(busy, 50)), "busy-add-p50-ms")
	b.ReportMetric(ms(pct(busy, 99)), "busy-add-p99-ms")
	b.ReportMetric(float64(pct(busy, 50))/float64(pct(idle, 50)), "add-p50-busy/idle")
	b.ReportMetric(float64(pct(busy, 99))/float64(pct(idle, 99)), "add-p99-busy/idle")
	b.ReportMetric(float64(busyBatches)/busyTime.Seconds(), "neighbour-batches/s")
	for side, text := range map[string]string{"idle": idleLog.String(), "busy": busyLog.String()} {
		ph := phasesIn(text)
		b.ReportMetric(float64(len(ph["podnet-adopt"]))/float64(len(ph["agent"])), side+"-warm-share")
	}
	b.ReportMetric(0, "ns/op")
}

// block adds and deletes every pod once, timing the adds.
func (e *benchEnv) block(b *testing.B) {
	for i := range e.pods {
		e.add(b, i)
	}
	for i := range e.pods {
		e.del(b, i)
	}
}

// setChurn starts or stops the neighbour and waits until it really runs
// (a batch completed since) or really idles (its batch in flight done). It
// returns the neighbour's batch count at that point.
func setChurn(b *testing.B, file string, on bool) int {
	b.Helper()
	var err error
	if on {
		_ = os.Remove(file + ".idle")
		n := churnCount(file)
		if err = os.WriteFile(file, nil, 0o644); err == nil {
			err = testenv.Eventually("the neighbour to complete a batch", 60*time.Second, 20*time.Millisecond, func() error {
				if churnCount(file) > n {
					return nil
				}
				return errors.New("no batch yet")
			})
		}
	} else {
		if err = os.Remove(file); err == nil || errors.Is(err, os.ErrNotExist) {
			err = testenv.Eventually("the neighbour to idle", 60*time.Second, 20*time.Millisecond, func() error {
				_, err := os.Stat(file + ".idle")
				return err
			})
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	return churnCount(file)
}

func churnCount(file string) int {
	raw, _ := os.ReadFile(file + ".n")
	n, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	return n
}
