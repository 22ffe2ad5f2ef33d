package compute

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"switchyard.dev/switchyard/controller/internal/procstat"
	"switchyard.dev/switchyard/controller/internal/workload"
)

// feed computes a workload the way the informers deliver it: namespaces,
// pods, then policies, each pod through the same conversion the controller
// uses.
func feed(b *testing.B, e *Engine, w workload.Workload) {
	for _, n := range w.Namespaces {
		e.UpsertNamespace(n.Name, n.Labels)
	}
	for _, p := range w.Pods {
		if in, ok := PodFromKubernetes(p); ok {
			e.UpsertPod(in)
		}
	}
	for _, p := range w.Policies {
		if err := e.UpsertKubernetesNetworkPolicy(p); err != nil {
			b.Fatal(err)
		}
	}
}

func vmHWM(b *testing.B) float64 {
	v, err := procstat.PeakRSS()
	if err != nil {
		b.Fatal(err)
	}
	return v
}

func resetHWM(b *testing.B) {
	if err := procstat.ResetPeakRSS(); err != nil {
		b.Fatal(err)
	}
}

func cpuTime(b *testing.B) time.Duration {
	d, err := procstat.CPUTime()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func benchInitial(b *testing.B, mk func() workload.Workload, wantPolicies int) {
	w := mk()
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		resetHWM(b)
		cpu0 := cpuTime(b)
		b.StartTimer()
		e := New(nil)
		feed(b, e, w)
		b.StopTimer()
		// CPU time (all threads, GC included) is steadier than wall time on a
		// shared machine.
		b.ReportMetric((cpuTime(b) - cpu0).Seconds(), "cpu-s")
		st := e.Stats()
		if st.Policies != wantPolicies {
			b.Fatalf("computed %d policies, want %d (%+v)", st.Policies, wantPolicies, st)
		}
		b.ReportMetric(vmHWM(b)/(1<<30), "peakRSS-GiB")
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "engineHeap-MiB")
		b.ReportMetric(float64(st.Groups), "groups")
		runtime.KeepAlive(e)
		b.StartTimer()
	}
}

func BenchmarkInitSmallNamespaces(b *testing.B) { benchInitial(b, workload.SmallNamespaces, 75000) }
func BenchmarkInitLargeNamespaces(b *testing.B) { benchInitial(b, workload.LargeNamespaces, 10100) }
func BenchmarkInitOneNamespace(b *testing.B)    { benchInitial(b, workload.OneNamespace, 10000) }
func BenchmarkInitNetpolPerPod(b *testing.B)    { benchInitial(b, workload.NetpolPerPod, 10000) }
func BenchmarkInitClusterScopedNetpol(b *testing.B) {
	benchInitial(b, workload.ClusterScopedNetpol, 10000)
}

type countSink struct{ n int }

func (s *countSink) Emit(string, Event) { s.n++ }

// BenchmarkPodLabelChangeSmallNamespaces: at SmallNamespaces scale with all
// 1,000 nodes watching, one pod's label flips between two values; timed from
// the informer's Pod object to the patches being emitted.
func BenchmarkPodLabelChangeSmallNamespaces(b *testing.B) {
	w := workload.SmallNamespaces()
	e := New(nil)
	feed(b, e, w)
	sink := &countSink{}
	e.SetSink(sink)
	for i := range 1000 {
		e.Watch("node-"+strconv.Itoa(i), func(NodeSnapshot) {})
	}
	r := rand.New(rand.NewPCG(3, 4))
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		src := w.Pods[r.IntN(len(w.Pods))]
		p := src.DeepCopy()
		if i%2 == 0 {
			p.Labels = map[string]string{"app-1": "scale-1", "moved": "yes"}
		}
		start := time.Now()
		in, _ := PodFromKubernetes(p)
		e.UpsertPod(in)
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(sink.n)/float64(len(lat)), "events/op")
}
