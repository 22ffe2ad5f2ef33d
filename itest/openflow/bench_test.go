package openflow

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	of "switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/itest/ovs"
)

const benchFlowCount = 100000

// BenchmarkInstall100k installs 100,000 distinct flows (pod forwarding
// plus conjunction clauses) into one table of a fresh bridge through our
// Conn (one atomic bundle, timed until the barrier reply), and in the same
// iteration the same flows from a file with `ovs-ofctl --bundle add-flows`
// into another fresh bridge. It reports both rates and their ratio
// (ours/ovs-ofctl; > 1 means we are faster). Run with -benchtime=1x
// -count=N and take medians.
func BenchmarkInstall100k(b *testing.B) {
	sw := ovs.Start(b, ovs.Options{Name: "of-bench"})
	flows := mixedFlows(10, 0x1234, benchFlowCount)
	mods := adds(flows)
	var sb strings.Builder
	for i := range flows {
		sb.WriteString(flows[i].String())
		sb.WriteByte('\n')
	}
	file := filepath.Join(b.TempDir(), "flows.txt")
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	var ours, theirs time.Duration
	// Each client gets a fresh bridge that is deleted before the other's
	// run, and the order alternates, so neither pays for the other's flows.
	runOurs := func(i int) time.Duration {
		br := fmt.Sprintf("bra%d", i)
		sw.AddBridge(b, br)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c, err := of.Dial(ctx, "unix", sw.MgmtSocket(br), of.Options{BundleLimit: benchFlowCount, Logger: quietLogger})
		if err != nil {
			b.Fatalf("Dial: %v", err)
		}
		defer c.Close()
		go func() {
			for range c.Events() {
			}
		}()
		start := time.Now()
		if err := c.BundleFlows(ctx, mods, true); err != nil {
			b.Fatalf("BundleFlows: %v", err)
		}
		if err := c.Barrier(ctx); err != nil {
			b.Fatalf("Barrier: %v", err)
		}
		d := time.Since(start)
		checkAndDelete(b, sw, br)
		return d
	}
	runOfctl := func(i int) time.Duration {
		br := fmt.Sprintf("brb%d", i)
		sw.AddBridge(b, br)
		start := time.Now()
		if out, err := sw.OfctlE("--bundle", "add-flows", br, file); err != nil {
			b.Fatalf("ovs-ofctl --bundle add-flows: %v\n%s", err, out)
		}
		d := time.Since(start)
		checkAndDelete(b, sw, br)
		return d
	}
	// Warm up ovs-vswitchd once (its allocator keeps the memory of the
	// first 100k flows), so neither measured client pays for the first load.
	sw.AddBridge(b, "brwarm")
	if out, err := sw.OfctlE("--bundle", "add-flows", "brwarm", file); err != nil {
		b.Fatalf("warm-up add-flows: %v\n%s", err, out)
	}
	checkAndDelete(b, sw, "brwarm")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var d1, d2 time.Duration
		if i%2 == 0 {
			d1, d2 = runOurs(i), runOfctl(i)
		} else {
			d2, d1 = runOfctl(i), runOurs(i)
		}
		ours += d1
		theirs += d2
		b.Logf("run %d: ours %.0f flows/s (%v), ovs-ofctl %.0f flows/s (%v), ratio %.2fx", i,
			benchFlowCount/d1.Seconds(), d1, benchFlowCount/d2.Seconds(), d2, d2.Seconds()/d1.Seconds())
	}
	b.StopTimer()
	n := float64(b.N * benchFlowCount)
	b.ReportMetric(n/ours.Seconds(), "ours_flows/s")
	b.ReportMetric(n/theirs.Seconds(), "ofctl_flows/s")
	b.ReportMetric(theirs.Seconds()/ours.Seconds(), "ratio")
}

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func checkAndDelete(b *testing.B, sw *ovs.Switch, br string) {
	b.Helper()
	if n := flowCount(b, sw, br); n != benchFlowCount {
		b.Fatalf("bridge %s has %d flows after install, want %d", br, n, benchFlowCount)
	}
	sw.Vsctl(b, "del-br", br)
}

var flowCountRE = regexp.MustCompile(`flow_count=(\d+)`)

func flowCount(b *testing.B, sw *ovs.Switch, br string) int {
	b.Helper()
	out := sw.Ofctl(b, "dump-aggregate", br)
	m := flowCountRE.FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("dump-aggregate %s: no flow_count in %q", br, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
