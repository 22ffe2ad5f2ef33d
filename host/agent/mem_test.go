package agent

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// discardSwitch accepts everything and keeps nothing, so a heap measurement
// sees only what the agent itself holds.
type discardSwitch struct{ events chan openflow.Event }

func (discardSwitch) Bundle(context.Context, []openflow.Message, bool) error { return nil }
func (discardSwitch) Send(context.Context, openflow.Message) error           { return nil }
func (discardSwitch) Request(context.Context, openflow.Message) (openflow.Message, error) {
	return nil, nil
}
func (d discardSwitch) Events() <-chan openflow.Event { return d.events }
func (discardSwitch) DumpFlows(context.Context, openflow.FlowStatsRequest) ([]openflow.FlowStats, error) {
	return nil, nil
}
func (discardSwitch) GroupStats(context.Context, uint32) ([]openflow.GroupStats, error) {
	return nil, nil
}
func (discardSwitch) MeterStats(context.Context, uint32) ([]openflow.MeterStats, error) {
	return nil, nil
}

// BenchmarkHeld100k reports the live heap the agent needs to hold 100,000
// flows (the same filler flows as itest/host's benchmarks), after a GC.
func BenchmarkHeld100k(b *testing.B) {
	const n, batch = 100000, 5000
	filler := func(i int) flow.Flow {
		a := netip.AddrFrom4([4]byte{10, byte(128 + i>>16&0x7f), byte(i >> 8), byte(i)})
		return flow.Flow{Table: "beta.ingress", Priority: 10, Match: flow.Match{}.IPv4().IPv4Dst(a), Actions: []flow.Action{flow.Output(uint32(1 + i%8))}}
	}
	var perFlow float64
	for range b.N {
		cfg := &config.Config{NodeName: "n", Bridge: config.Bridge{Name: "br-int", DatapathType: "netdev"}, RunDir: b.TempDir(), Node: config.Node{MTU: 1500}}
		a, err := New(cfg, discardSwitch{}, &fakeDB{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if _, err := a.RegisterLocal(ctx, "beta", &sdk.DescribeResponse{Name: "beta", Tables: []sdk.Table{
			{Name: "beta.ingress", Pipeline: flow.PipelineIP, Stage: flow.StageIngressSecurity, Miss: sdk.MissNext}}}); err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := 0; i < n; i += batch {
			bt := flow.NewBatch()
			for j := i; j < i+batch; j++ {
				bt.AddFlows(filler(j))
			}
			if err := a.Apply(ctx, "beta", bt, config.Limits{}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perFlow = float64(after.HeapAlloc-before.HeapAlloc) / n
		if path := os.Getenv("SY_HEAP_PROFILE"); path != "" { // where the bytes are
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.WriteHeapProfile(f); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		runtime.KeepAlive(a)
	}
	b.ReportMetric(perFlow, "heap-B/flow")
	b.ReportMetric(perFlow*n/(1<<20), "heap-MiB/100k")
}

// BenchmarkRefresh100k is the agent's side of a plugin restart: the new
// round re-submits 100,000 unchanged flows (all refreshes) and syncs.
func BenchmarkRefresh100k(b *testing.B) {
	const n, batch = 100000, 5000
	filler := func(i int) flow.Flow {
		a := netip.AddrFrom4([4]byte{10, byte(128 + i>>16&0x7f), byte(i >> 8), byte(i)})
		return flow.Flow{Table: "beta.ingress", Priority: 10, Match: flow.Match{}.IPv4().IPv4Dst(a), Actions: []flow.Action{flow.Output(uint32(1 + i%8))}}
	}
	cfg := &config.Config{NodeName: "n", Bridge: config.Bridge{Name: "br-int", DatapathType: "netdev"}, RunDir: b.TempDir(), Node: config.Node{MTU: 1500}}
	a, err := New(cfg, discardSwitch{}, &fakeDB{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	desc := &sdk.DescribeResponse{Name: "beta", Tables: []sdk.Table{{Name: "beta.ingress", Pipeline: flow.PipelineIP, Stage: flow.StageIngressSecurity, Miss: sdk.MissNext}}}
	batches := make([]*flow.Batch, 0, n/batch)
	for i := 0; i < n; i += batch {
		bt := flow.NewBatch()
		for j := i; j < i+batch; j++ {
			bt.AddFlows(filler(j))
		}
		batches = append(batches, bt)
	}
	apply := func() {
		if _, err := a.RegisterLocal(ctx, "beta", desc); err != nil {
			b.Fatal(err)
		}
		for _, bt := range batches {
			if err := a.Apply(ctx, "beta", bt, config.Limits{}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := a.Synced(ctx, "beta"); err != nil {
			b.Fatal(err)
		}
	}
	apply()
	b.ResetTimer()
	for range b.N {
		apply()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/flow")
}
