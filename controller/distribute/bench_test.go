package distribute

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"switchyard.dev/switchyard/controller/compute"
	"switchyard.dev/switchyard/controller/internal/workload"
)

// BenchmarkPodLabelChangeSmallNamespacesHub: SmallNamespaces with all 1,000
// nodes holding an open event log. One pod's label flips; timed from the
// informer's Pod object until every affected node's log holds the patch as a
// wire event.
func BenchmarkPodLabelChangeSmallNamespacesHub(b *testing.B) {
	w := workload.SmallNamespaces()
	e := compute.New(nil)
	for _, n := range w.Namespaces {
		e.UpsertNamespace(n.Name, n.Labels)
	}
	for _, p := range w.Pods {
		in, _ := compute.PodFromKubernetes(p)
		e.UpsertPod(in)
	}
	for _, p := range w.Policies {
		if err := e.UpsertKubernetesNetworkPolicy(p); err != nil {
			b.Fatal(err)
		}
	}
	h := NewHub(e, nil, 1<<16)
	for i := range 1000 {
		h.open("node-"+strconv.Itoa(i), func(compute.NodeSnapshot, string, uint64, *nodeLog) {})
	}
	count := func() (n uint64) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, nl := range h.nodes {
			n += nl.next
		}
		return n
	}
	before := count()
	r := rand.New(rand.NewPCG(3, 4))
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		p := w.Pods[r.IntN(len(w.Pods))].DeepCopy()
		if i%2 == 0 {
			p.Labels = map[string]string{"app-1": "scale-1", "moved": "yes"}
		}
		start := time.Now()
		in, _ := compute.PodFromKubernetes(p)
		e.UpsertPod(in)
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(count()-before)/float64(len(lat)), "events/op")
}
