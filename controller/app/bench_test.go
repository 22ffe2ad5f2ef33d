package app

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"testing"
	"time"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/controller/internal/procstat"
	"switchyard.dev/switchyard/controller/internal/workload"
)

// crdListKinds tells the fake dynamic client the list kind of each native
// resource the controller watches.
var crdListKinds = map[schema.GroupVersionResource]string{
	crdv1.TiersResource:                  "TierList",
	crdv1.ClusterNetworkPoliciesResource: "ClusterNetworkPolicyList",
	crdv1.NetworkPoliciesResource:        "NetworkPolicyList",
	crdv1.ClusterGroupsResource:          "ClusterGroupList",
	crdv1.GroupsResource:                 "GroupList",
}

// fakeController assembles the real controller over a fake clientset
// preloaded with objs and an empty fake dynamic client for the native
// resources.
func fakeController(objs []apiruntime.Object) (*parts, *fake.Clientset) {
	kube := fake.NewSimpleClientset(objs...)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(apiruntime.NewScheme(), crdListKinds)
	return assemble(slog.New(slog.DiscardHandler), kube, dyn, 0, nil), kube
}

// runUntilReady starts p's controller and returns once it is Ready (see
// reconcile.Controller.Ready: every informer's initial list was handed to
// its handlers, and the queue then drained with no key in a worker's
// hands), with a stop function that ends it and waits.
func runUntilReady(tb testing.TB, p *parts) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.ctrl.Run(ctx, defaultWorkers) }()
	select {
	case <-p.ctrl.Ready():
	case err := <-done:
		cancel()
		tb.Fatalf("controller stopped before it was ready: %v", err)
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("controller run: %v", err)
		}
	}
}

// benchControllerInit runs the whole controller the way Antrea's
// TestInitXLargeScale* runs its own: informers over a fake clientset that
// holds the workload, event handlers, the workqueue and workers, the engine
// and the distribution hub, timed from starting the informers until the
// controller is idle. Idle is the controller's Ready: the queue's backlog
// count (kept under the queue's own lock) reached zero after every handler
// saw its initial list; the benchmark then checks that every policy was
// computed. No sleep or idle timeout is involved, so nothing needs
// subtracting (Antrea waits for 3 s without heartbeats and subtracts them).
//
// Peak RSS is the whole process's, as Antrea's figures are: the fake
// clientset's copies of the objects and the workload itself stay resident
// and count; only setup garbage, returned to the OS before the peak is
// restarted, does not.
func benchControllerInit(b *testing.B, mk func() workload.Workload, wantPolicies int) {
	w := mk()
	objs := w.Objects()
	for b.Loop() {
		b.StopTimer()
		p, _ := fakeController(objs)
		runtime.GC()
		debug.FreeOSMemory()
		if err := procstat.ResetPeakRSS(); err != nil {
			b.Fatal(err)
		}
		base, err := procstat.RSS()
		if err != nil {
			b.Fatal(err)
		}
		cpu0, err := procstat.CPUTime()
		if err != nil {
			b.Fatal(err)
		}
		stopProfile := profileTimed(b)
		start := time.Now()
		b.StartTimer()
		stop := runUntilReady(b, p)
		b.StopTimer()
		stopProfile()
		wall := time.Since(start)
		cpu1, err := procstat.CPUTime()
		if err != nil {
			b.Fatal(err)
		}
		peak, err := procstat.PeakRSS()
		if err != nil {
			b.Fatal(err)
		}
		st := p.engine.Stats()
		if st.Policies != wantPolicies || st.Pods != len(w.Pods) {
			b.Fatalf("idle with %d policies and %d pods computed, want %d and %d (%+v)", st.Policies, st.Pods, wantPolicies, len(w.Pods), st)
		}
		// Beyond Antrea's measure, untimed: every node of the workload
		// opens its watch and is served its snapshot (the wire events of its
		// span, up to Synced) by the hub, as after a controller restart.
		serve0 := time.Now()
		events := serveAllNodes(b, p, w)
		b.ReportMetric(time.Since(serve0).Seconds(), "serveNodes-s")
		b.ReportMetric(float64(events), "snapshotEvents")
		stop()
		b.ReportMetric(wall.Seconds(), "s")
		b.ReportMetric((cpu1 - cpu0).Seconds(), "cpu-s")
		b.ReportMetric(peak/(1<<30), "peakRSS-GiB")
		// The fixture's share: the workload and the fake clientset's copy.
		b.ReportMetric(base/(1<<30), "fixtureRSS-GiB")
		b.ReportMetric((peak-base)/(1<<30), "ctrlRSS-GiB")
		b.StartTimer()
	}
}

// serveAllNodes opens a watch for every node that has a pod in w and reads
// its snapshot up to the Synced marker; it returns how many events the
// snapshots held.
func serveAllNodes(b *testing.B, p *parts, w workload.Workload) int {
	nodes := map[string]bool{}
	for _, pod := range w.Pods {
		nodes[pod.Spec.NodeName] = true
	}
	synced := errors.New("synced")
	total := 0
	for node := range nodes {
		n := 0
		err := p.hub.Serve(context.Background(), node, "", 0, func(ev *apiv1.WatchEvent) error {
			n++
			if ev.GetSynced() != nil {
				return synced
			}
			return nil
		})
		if !errors.Is(err, synced) {
			b.Fatalf("serving node %s: %v", node, err)
		}
		total += n
	}
	return total
}

// profileTimed writes a CPU profile of the timed part alone to the file
// named by $CTRLBENCH_CPUPROFILE, if set: -test.cpuprofile would mix in
// generating the workload and filling the fake clientset.
func profileTimed(b *testing.B) (stop func()) {
	path := os.Getenv("CTRLBENCH_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// benchInformersOnly is the baseline beside benchControllerInit, measured
// the same way on the same fixture: the fake clientset's List and Watch and
// client-go's informers for the same kinds at the factory's defaults (full
// objects, namespace index), with handlers that do nothing, timed until
// every handler saw its initial list. It is what any informer-based
// controller pays before doing anything; it is not a strict floor, since
// the controller's informers keep less (see reconcile/direct.go).
func benchInformersOnly(b *testing.B, mk func() workload.Workload) {
	w := mk()
	objs := w.Objects()
	for b.Loop() {
		b.StopTimer()
		kube := fake.NewSimpleClientset(objs...)
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(apiruntime.NewScheme(), crdListKinds)
		factory := informers.NewSharedInformerFactory(kube, 0)
		dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
		var synced []cache.DoneChecker
		for _, inf := range []cache.SharedIndexInformer{
			factory.Core().V1().Pods().Informer(), factory.Core().V1().Namespaces().Informer(),
			factory.Networking().V1().NetworkPolicies().Informer(), factory.Core().V1().Nodes().Informer(),
		} {
			reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{})
			if err != nil {
				b.Fatal(err)
			}
			synced = append(synced, inf.HasSyncedChecker(), reg.HasSyncedChecker())
		}
		for gvr := range crdListKinds {
			inf := dynFactory.ForResource(gvr).Informer()
			reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{})
			if err != nil {
				b.Fatal(err)
			}
			synced = append(synced, inf.HasSyncedChecker(), reg.HasSyncedChecker())
		}
		runtime.GC()
		debug.FreeOSMemory()
		if err := procstat.ResetPeakRSS(); err != nil {
			b.Fatal(err)
		}
		cpu0, err := procstat.CPUTime()
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		b.StartTimer()
		factory.Start(ctx.Done())
		dynFactory.Start(ctx.Done())
		if !cache.WaitFor(ctx, "", synced...) {
			b.Fatal("informers did not sync")
		}
		b.StopTimer()
		wall := time.Since(start)
		cpu1, err := procstat.CPUTime()
		if err != nil {
			b.Fatal(err)
		}
		peak, err := procstat.PeakRSS()
		if err != nil {
			b.Fatal(err)
		}
		cancel()
		factory.Shutdown()
		dynFactory.Shutdown()
		b.ReportMetric(wall.Seconds(), "s")
		b.ReportMetric((cpu1 - cpu0).Seconds(), "cpu-s")
		b.ReportMetric(peak/(1<<30), "peakRSS-GiB")
		b.StartTimer()
	}
}

func BenchmarkInformersOnlySmallNamespaces(b *testing.B) {
	benchInformersOnly(b, workload.SmallNamespaces)
}
func BenchmarkInformersOnlyLargeNamespaces(b *testing.B) {
	benchInformersOnly(b, workload.LargeNamespaces)
}
func BenchmarkInformersOnlyOneNamespace(b *testing.B) { benchInformersOnly(b, workload.OneNamespace) }
func BenchmarkInformersOnlyNetpolPerPod(b *testing.B) { benchInformersOnly(b, workload.NetpolPerPod) }
func BenchmarkInformersOnlyClusterScopedNetpol(b *testing.B) {
	benchInformersOnly(b, workload.ClusterScopedNetpol)
}

func BenchmarkControllerInitSmallNamespaces(b *testing.B) {
	benchControllerInit(b, workload.SmallNamespaces, 75000)
}
func BenchmarkControllerInitLargeNamespaces(b *testing.B) {
	benchControllerInit(b, workload.LargeNamespaces, 10100)
}
func BenchmarkControllerInitOneNamespace(b *testing.B) {
	benchControllerInit(b, workload.OneNamespace, 10000)
}
func BenchmarkControllerInitNetpolPerPod(b *testing.B) {
	benchControllerInit(b, workload.NetpolPerPod, 10000)
}
func BenchmarkControllerInitClusterScopedNetpol(b *testing.B) {
	benchControllerInit(b, workload.ClusterScopedNetpol, 10000)
}
