package host

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard.dev/switchyard/host/agent"
	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

const (
	benchFlows = 100000
	benchBatch = 5000
)

// fillerFlow is the i-th benchmark flow, the same as the beta test plugin's
// FillerFlow, so both paths install identical flows.
func fillerFlow(i int) flow.Flow {
	a := netip.AddrFrom4([4]byte{10, byte(128 + i>>16&0x7f), byte(i >> 8), byte(i)})
	return flow.Flow{Table: "beta.ingress", Priority: 10, Match: flow.Match{}.IPv4().IPv4Dst(a), Actions: []flow.Action{flow.Output(uint32(1 + i%8))}}
}

var betaTables = []sdk.Table{
	{Name: "beta.guard", Pipeline: flow.PipelineIP, Stage: flow.StageValidation, Miss: sdk.MissNext},
	{Name: "beta.ingress", Pipeline: flow.PipelineIP, Stage: flow.StageIngressSecurity, Miss: sdk.MissNext},
}

// inProcessAgent runs the agent inside the benchmark process, so the direct
// path (the host calling Apply itself) can be timed against the plugin path
// (a real beta process submitting through the SDK) in the same run.
func inProcessAgent(b testing.TB, n *node, plugins ...pluginEntry) (*agent.Agent, *config.Config) {
	b.Helper()
	a, cfg := newInProcessAgent(b, n, plugins...)
	if err := a.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(a.Stop)
	return a, cfg
}

// newInProcessAgent builds an agent in the test process, connected to the
// node's switch, not started.
func newInProcessAgent(b testing.TB, n *node, plugins ...pluginEntry) (*agent.Agent, *config.Config) {
	b.Helper()
	n.writeConfig(plugins...)
	cfg, err := config.Load(n.cfgPath, nil)
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	sw, db, err := agent.Connect(ctx, cfg, log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sw.Close(); db.Close() })
	a, err := agent.New(cfg, sw, db, log)
	if err != nil {
		b.Fatal(err)
	}
	return a, cfg
}

func fillerPlugin(n *node) pluginEntry {
	return pluginEntry{name: "beta", path: bins.beta, config: map[string]any{"flows": benchFlows, "batch": benchBatch}}
}

func switchFlowCount(b *testing.B, n *node) int {
	out, err := n.sw.OfctlE("--no-stats", "dump-aggregate", "br-int")
	if err != nil {
		b.Fatal(err)
	}
	i := strings.Index(out, "flow_count=")
	c, _ := strconv.Atoi(strings.Fields(out[i+len("flow_count="):])[0])
	return c
}

// BenchmarkInstall100k: flows/s for 100,000 flows in batches of 5,000,
// submitted by a plugin process through the SDK vs installed by the host
// directly through the same Apply path. Each iteration runs both paths back
// to back (paired, so machine load drifts hit both alike) and reports each
// path's rate and their ratio. The plugin path is timed by the host from its
// Start call to the plugin's Synced (the flows are built, encoded, sent,
// decoded, arbitrated and installed in that window); the direct path from
// building the first batch to the last Apply returning. Both build the next
// batch while the current one is applied.
func BenchmarkInstall100k(b *testing.B) {
	n := newNode(b)
	a, cfg := inProcessAgent(b, n)
	ctx := context.Background()
	lim := cfg.Limits
	empty := *cfg
	empty.Plugins = nil
	n.writeConfig(fillerPlugin(n))
	withBeta, err := config.Load(n.cfgPath, nil)
	if err != nil {
		b.Fatal(err)
	}
	var direct, plugin time.Duration
	for range b.N {
		// Direct: the host submits to itself.
		if _, err := a.RegisterLocal(ctx, "direct", &sdk.DescribeResponse{Name: "direct", Tables: betaTables}); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		start := time.Now()
		// Built one batch ahead, exactly as the beta plugin does.
		batches := make(chan *flow.Batch, 1)
		go func() {
			defer close(batches)
			for i := 0; i < benchFlows; i += benchBatch {
				bt := flow.NewBatch()
				for j := i; j < min(benchFlows, i+benchBatch); j++ {
					bt.AddFlows(fillerFlow(j))
				}
				batches <- bt
			}
		}()
		for bt := range batches {
			if err := a.Apply(ctx, "direct", bt, lim); err != nil {
				b.Fatal(err)
			}
		}
		direct += time.Since(start)
		if c := switchFlowCount(b, n); c < benchFlows {
			b.Fatalf("switch holds %d flows, want >= %d", c, benchFlows)
		}
		a.RemoveOwner(ctx, "direct")

		// Plugin: a beta process submits the same flows through the SDK.
		runtime.GC()
		a.Reload(ctx, withBeta) // returns when beta's Start (all batches + Synced) returned
		if err := a.WaitSynced(ctx, "beta"); err != nil {
			b.Fatal(err)
		}
		for _, p := range a.Plugins() {
			if p.Name == "beta" {
				plugin += time.Duration(p.SyncMillis * float64(time.Millisecond))
			}
		}
		if c := switchFlowCount(b, n); c < benchFlows {
			b.Fatalf("switch holds %d flows, want >= %d", c, benchFlows)
		}
		a.Reload(ctx, &empty)
	}
	b.ReportMetric(float64(benchFlows*b.N)/direct.Seconds(), "direct-flows/s")
	b.ReportMetric(float64(benchFlows*b.N)/plugin.Seconds(), "plugin-flows/s")
	b.ReportMetric(direct.Seconds()/plugin.Seconds(), "plugin/direct")
	b.ReportMetric(0, "ns/op")
}

func rssKB(b *testing.B, pid int) int {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(s), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			return kb
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// settledRSSKB is pid's RSS once the agent settled after its plugins
// synced: the agent returns a sync's garbage to the kernel right after it
// (host/agent/memory.go), so the figure is what it holds, not the burst.
func settledRSSKB(b *testing.B, pid int) int {
	time.Sleep(time.Second)
	return rssKB(b, pid)
}

// cpuMillis is the user+system CPU time pid has used.
func cpuMillis(b *testing.B, pid int) float64 {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the ")" that ends the command name: state is field 3,
	// utime and stime are fields 14 and 15.
	f := strings.Fields(string(s[strings.LastIndexByte(string(s), ')')+1:]))
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return float64(ut+st) * 1000 / 100 // USER_HZ is 100 on Linux
}

// BenchmarkResync100k: time from kill -9 of a plugin holding 100,000 flows
// until its next incarnation re-installed them all and said it is synced
// (includes noticing the death and starting the process). Also reports the agent binary's RSS holding those flows, and
// where the CPU went during a resync: the agent, the new plugin process and
// ovs-vswitchd.
func BenchmarkResync100k(b *testing.B) {
	n := newNode(b)
	n.writeConfig(fillerPlugin(n))
	n.startAgent("beta")
	rss := settledRSSKB(b, n.agent.Pid())
	var total, hostSync time.Duration
	var agentCPU, pluginCPU, ovsCPU float64
	for range b.N {
		before := n.plugins()["beta"]
		a0, o0 := cpuMillis(b, n.agent.Pid()), cpuMillis(b, n.sw.VswitchdPid())
		start := time.Now()
		if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		after := n.waitPlugins("beta resynced", func(ps map[string]pluginStatus) error {
			if ps["beta"].PID == before.PID {
				return fmt.Errorf("not restarted yet")
			}
			return nil
		}, "beta")["beta"]
		total += time.Since(start)
		hostSync += time.Duration(after.SyncMillis * float64(time.Millisecond))
		agentCPU += cpuMillis(b, n.agent.Pid()) - a0
		ovsCPU += cpuMillis(b, n.sw.VswitchdPid()) - o0
		pluginCPU += cpuMillis(b, after.PID)
	}
	if c := switchFlowCount(b, n); c < benchFlows {
		b.Fatalf("switch holds %d flows after resync, want >= %d", c, benchFlows)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/kill-to-synced")
	b.ReportMetric(float64(hostSync.Milliseconds())/float64(b.N), "ms/start-to-synced")
	b.ReportMetric(float64(rss)/1024, "agent-RSS-MiB")
	b.ReportMetric(agentCPU/float64(b.N), "agent-cpu-ms/resync")
	b.ReportMetric(pluginCPU/float64(b.N), "plugin-cpu-ms/resync")
	b.ReportMetric(ovsCPU/float64(b.N), "ovs-cpu-ms/resync")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAgentRSSIdle is the agent binary's RSS with one plugin and no
// flows beyond its table-miss flows: the baseline for BenchmarkResync100k's
// agent-RSS-MiB.
func BenchmarkAgentRSSIdle(b *testing.B) {
	n := newNode(b)
	n.writeConfig(pluginEntry{name: "beta", path: bins.beta, config: map[string]any{}})
	n.startAgent("beta")
	var kb int
	for range b.N {
		kb = settledRSSKB(b, n.agent.Pid())
	}
	b.ReportMetric(float64(kb)/1024, "agent-RSS-MiB")
	b.ReportMetric(0, "ns/op")
}
