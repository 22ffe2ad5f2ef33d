package compute

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The workloads are the shapes of Antrea's controller scale tests, so the
// figures can be compared side by side. Pods get random IPs and one of 1,000
// node names; every policy has both policy types.

type workload struct {
	namespaces []*corev1.Namespace
	pods       []*corev1.Pod
	policies   []*networkingv1.NetworkPolicy
}

func newGen() *gen { return &gen{r: rand.New(rand.NewPCG(1, 2))} }

type gen struct{ r *rand.Rand }

func (g *gen) pod(ns, name string, labels map[string]string) *corev1.Pod {
	ip := g.r.Uint32()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: "node-" + strconv.Itoa(g.r.IntN(1000)), Containers: []corev1.Container{{Name: "c"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("%d.%d.%d.%d", 10+byte(ip>>24)%100, byte(ip>>16), byte(ip>>8), byte(ip))}}},
	}
}

func ml(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

var bothTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}

// np selects sel and allows ingress from peer (nil: no rules, deny all).
func np(ns, name string, sel *metav1.LabelSelector, peer *networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel, PolicyTypes: bothTypes}}
	if peer != nil {
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{*peer}}}
	}
	return p
}

func nsObj(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func smallNamespaces() workload {
	g, w := newGen(), workload{}
	for i := range 25000 {
		ns := "ns-" + strconv.Itoa(i)
		w.namespaces = append(w.namespaces, nsObj(ns, map[string]string{"app": ns}))
		for j := range 4 {
			k := strconv.Itoa(j/2 + 1)
			w.pods = append(w.pods, g.pod(ns, "pod-"+strconv.Itoa(j), map[string]string{"app-" + k: "scale-" + k}))
		}
		w.policies = append(w.policies, np(ns, "default-deny-all", ml(), nil))
		for _, k := range []string{"1", "2"} {
			w.policies = append(w.policies, np(ns, "np-"+k, ml("app-"+k, "scale-"+k), &networkingv1.NetworkPolicyPeer{PodSelector: ml("app-"+k, "scale-"+k)}))
		}
	}
	return w
}

func largeNamespaces() workload {
	g, w := newGen(), workload{}
	for i := range 100 {
		ns := "ns-" + strconv.Itoa(i)
		w.namespaces = append(w.namespaces, nsObj(ns, map[string]string{"app": ns}))
		w.policies = append(w.policies, np(ns, "default-deny-all", ml(), nil))
		for j := range 100 {
			k := strconv.Itoa(j)
			w.policies = append(w.policies, np(ns, "np-"+k, ml("app-"+k, "scale-"+k), &networkingv1.NetworkPolicyPeer{PodSelector: ml("app-"+k, "scale-"+k)}))
			for p := range 10 {
				w.pods = append(w.pods, g.pod(ns, "pod-"+k+"-"+strconv.Itoa(p), map[string]string{"app-" + k: "scale-" + k}))
			}
		}
	}
	return w
}

func oneNamespace() workload {
	g, w := newGen(), workload{}
	w.namespaces = append(w.namespaces, nsObj("one", map[string]string{"app": "one"}))
	for i := range 10000 {
		w.pods = append(w.pods, g.pod("one", "pod-"+strconv.Itoa(i), map[string]string{"app-1": "scale-1"}))
		w.policies = append(w.policies, np("one", "np-"+strconv.Itoa(i), ml("app-1", "scale-1"), &networkingv1.NetworkPolicyPeer{PodSelector: ml("app-1", "scale-1")}))
	}
	return w
}

func netpolPerPod() workload {
	g, w := newGen(), workload{}
	w.namespaces = append(w.namespaces, nsObj("one", map[string]string{"app": "one"}))
	for i := range 10000 {
		w.pods = append(w.pods, g.pod("one", "pod-"+strconv.Itoa(i), map[string]string{"app": "p" + strconv.Itoa(i)}))
		partner := "p" + strconv.Itoa(i^1)
		w.policies = append(w.policies, np("one", "np-"+strconv.Itoa(i), ml("app", "p"+strconv.Itoa(i)), &networkingv1.NetworkPolicyPeer{PodSelector: ml("app", partner)}))
	}
	return w
}

func clusterScopedNetpol() workload {
	g, w := newGen(), workload{}
	for i := range 1000 {
		ns := "ns-" + strconv.Itoa(i)
		company := "company-" + strconv.Itoa(i%100)
		w.namespaces = append(w.namespaces, nsObj(ns, map[string]string{"company": company}))
		for j := range 10 {
			k := "scale-" + strconv.Itoa(j)
			w.policies = append(w.policies, np(ns, "np-"+strconv.Itoa(j), ml("app", k),
				&networkingv1.NetworkPolicyPeer{NamespaceSelector: ml("company", company), PodSelector: ml("app", k)}))
			for p := range 10 {
				w.pods = append(w.pods, g.pod(ns, "pod-"+strconv.Itoa(j)+"-"+strconv.Itoa(p), map[string]string{"app": k}))
			}
		}
	}
	return w
}

// feed computes a workload the way the informers deliver it: namespaces,
// pods, then policies, each pod through the same conversion the controller
// uses.
func feed(b *testing.B, e *Engine, w workload) {
	for _, n := range w.namespaces {
		e.UpsertNamespace(n.Name, n.Labels)
	}
	for _, p := range w.pods {
		if in, ok := PodFromKubernetes(p); ok {
			e.UpsertPod(in)
		}
	}
	for _, p := range w.policies {
		if err := e.UpsertKubernetesNetworkPolicy(p); err != nil {
			b.Fatal(err)
		}
	}
}

// vmHWM reads the process's peak RSS in bytes; resetHWM restarts the peak.
func vmHWM(b *testing.B) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatalf("reading peak RSS: %v", err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, err := strconv.ParseFloat(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 64)
			if err != nil {
				b.Fatalf("parsing VmHWM %q: %v", v, err)
			}
			return kb * 1024
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

func resetHWM(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Fatalf("resetting peak RSS via /proc/self/clear_refs: %v", err)
	}
}

func benchInitial(b *testing.B, mk func() workload, wantPolicies int) {
	w := mk()
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		resetHWM(b)
		b.StartTimer()
		e := New(nil)
		feed(b, e, w)
		b.StopTimer()
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

func BenchmarkInitSmallNamespaces(b *testing.B)     { benchInitial(b, smallNamespaces, 75000) }
func BenchmarkInitLargeNamespaces(b *testing.B)     { benchInitial(b, largeNamespaces, 10100) }
func BenchmarkInitOneNamespace(b *testing.B)        { benchInitial(b, oneNamespace, 10000) }
func BenchmarkInitNetpolPerPod(b *testing.B)        { benchInitial(b, netpolPerPod, 10000) }
func BenchmarkInitClusterScopedNetpol(b *testing.B) { benchInitial(b, clusterScopedNetpol, 10000) }

type countSink struct{ n int }

func (s *countSink) Emit(string, Event) { s.n++ }

// BenchmarkPodLabelChangeSmallNamespaces: at SmallNamespaces scale with all
// 1,000 nodes watching, one pod's label flips between two values; timed from
// the informer's Pod object to the patches being emitted.
func BenchmarkPodLabelChangeSmallNamespaces(b *testing.B) {
	w := smallNamespaces()
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
		src := w.pods[r.IntN(len(w.pods))]
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
