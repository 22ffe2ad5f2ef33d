package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/controller/compute"
	"switchyard.dev/switchyard/controller/distribute"
)

// kind of a queued object.
type kind uint8

const (
	kTier kind = iota
	kCNP
	kNP
	kClusterGroup
	kGroup
)

func (k kind) String() string {
	return [...]string{"Tier", "ClusterNetworkPolicy", "NetworkPolicy", "ClusterGroup", "Group"}[k]
}

type key struct {
	kind      kind
	namespace string
	name      string
}

// Controller feeds the engine from informers and writes policy status.
type Controller struct {
	log         *slog.Logger
	engine      *compute.Engine
	realization *distribute.Realization
	kube        kubernetes.Interface
	dyn         dynamic.Interface

	factory    informers.SharedInformerFactory
	dynFactory dynamicinformer.DynamicSharedInformerFactory
	listers    map[kind]cache.GenericLister
	informers  []cache.SharedIndexInformer
	handlers   []cache.ResourceEventHandlerRegistration
	backlog    *backlog
	nodes      cache.SharedIndexInformer
	queue      workqueue.TypedRateLimitingInterface[key]

	ready     chan struct{}
	readyOnce sync.Once
	status    *statusWriter
	// recorder posts Events on the objects the controller judges (an
	// invalid NetworkPolicy); set by Run before any worker starts.
	recorder record.EventRecorder
	// observe: Options.Observe (never nil).
	observe func(kind string, took time.Duration)
	// stores by kind, for ObjectCounts.
	stores map[string]cache.Store
}

// Options configure a Controller.
type Options struct {
	Log         *slog.Logger
	Engine      *compute.Engine
	Realization *distribute.Realization
	Kube        kubernetes.Interface
	Dynamic     dynamic.Interface
	// Resync is the informers' resync period; 0 disables resync.
	Resync time.Duration
	// Observe, if set, is told how long the engine took for each object
	// change, by kind (Pod, Namespace, K8sNetworkPolicy from their
	// handlers; the CRD kinds from the workqueue's sync): the
	// controller's computation-time metric.
	Observe func(kind string, took time.Duration)
}

// New builds a controller; Run starts it.
func New(o Options) *Controller {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	bl := newBacklog()
	c := &Controller{
		log: o.Log, engine: o.Engine, realization: o.Realization, kube: o.Kube, dyn: o.Dynamic,
		factory:    informers.NewSharedInformerFactory(o.Kube, o.Resync),
		dynFactory: dynamicinformer.NewDynamicSharedInformerFactory(o.Dynamic, o.Resync),
		listers:    map[kind]cache.GenericLister{},
		backlog:    bl,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[key](),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: "switchyard-controller", MetricsProvider: bl}),
		ready:   make(chan struct{}),
		observe: o.Observe,
		stores:  map[string]cache.Store{},
	}
	if c.observe == nil {
		c.observe = func(string, time.Duration) {}
	}
	c.status = newStatusWriter(c)
	// The controller reads these caches by key only, so they keep no
	// namespace index (the factory's default): for 100k pods it is a map of
	// 100k keys maintained for nothing.
	pods := c.factory.InformerFor(&corev1.Pod{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewPodInformer(cs, metav1.NamespaceAll, resync, cache.Indexers{})
	})
	// Keep only what the engine reads, converted once: a cluster's pods are
	// the bulk of the controller's memory.
	_ = pods.SetTransform(toCachedPod)
	c.handle(pods, c.timed("Pod", pods, c.podHandler()))
	nss := c.factory.InformerFor(&corev1.Namespace{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewNamespaceInformer(cs, resync, cache.Indexers{})
	})
	c.handle(nss, c.timed("Namespace", nss, c.namespaceHandler()))
	nps := c.factory.InformerFor(&networkingv1.NetworkPolicy{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return networkinginformers.NewNetworkPolicyInformer(cs, metav1.NamespaceAll, resync, cache.Indexers{})
	})
	c.handle(nps, c.timed("K8sNetworkPolicy", nps, c.k8sPolicyHandler()))
	c.nodes = c.factory.Core().V1().Nodes().Informer()
	c.stores["Node"] = c.nodes.GetStore()
	for k, gvr := range map[kind]schema.GroupVersionResource{
		kTier: crdv1.TiersResource, kCNP: crdv1.ClusterNetworkPoliciesResource, kNP: crdv1.NetworkPoliciesResource,
		kClusterGroup: crdv1.ClusterGroupsResource, kGroup: crdv1.GroupsResource,
	} {
		c.watch(k, c.dynFactory.ForResource(gvr).Informer())
	}
	return c
}

// handle registers a handler on an informer the controller waits for.
func (c *Controller) handle(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) {
	c.informers = append(c.informers, inf)
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		// Only possible on a stopped informer, which New never has.
		panic(fmt.Sprintf("adding event handler: %v", err))
	}
	c.handlers = append(c.handlers, reg)
}

// watch feeds an informer's objects to the workqueue as keys of kind k.
func (c *Controller) watch(k kind, inf cache.SharedIndexInformer) {
	c.listers[k] = cache.NewGenericLister(inf.GetIndexer(), schema.GroupResource{Resource: k.String()})
	c.stores[k.String()] = inf.GetStore()
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, err := metaOf(obj)
		if err != nil {
			c.log.Error("informer delivered an object without metadata", "kind", k, "err", err)
			return
		}
		c.queue.Add(key{k, m.GetNamespace(), m.GetName()})
	}
	c.handle(inf, cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
}

// timed wraps a handler that computes in the engine, timing each call,
// and records its informer's store for ObjectCounts.
func (c *Controller) timed(kind string, inf cache.SharedIndexInformer, h cache.ResourceEventHandler) cache.ResourceEventHandler {
	c.stores[kind] = inf.GetStore()
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			start := time.Now()
			h.OnAdd(obj, false)
			c.observe(kind, time.Since(start))
		},
		UpdateFunc: func(old, obj any) {
			start := time.Now()
			h.OnUpdate(old, obj)
			c.observe(kind, time.Since(start))
		},
		DeleteFunc: func(obj any) {
			start := time.Now()
			h.OnDelete(obj)
			c.observe(kind, time.Since(start))
		},
	}
}

// ObjectCounts is how many objects of each kind the controller's caches
// hold (the objects metric).
func (c *Controller) ObjectCounts() map[string]int {
	out := make(map[string]int, len(c.stores))
	for k, s := range c.stores {
		out[k] = len(s.ListKeys())
	}
	return out
}

func metaOf(obj any) (metav1.Object, error) {
	if m, ok := obj.(metav1.Object); ok {
		return m, nil
	}
	return nil, fmt.Errorf("%T has no object metadata", obj)
}

// Ready is closed once the informers synced and the initial backlog was
// computed, so nodes are not served a half-built snapshot: every informer
// handed every object of its initial list to its handler, and the queue
// then became empty with no key in a worker's hands (see backlog.go).
func (c *Controller) Ready() <-chan struct{} { return c.ready }

// NodeKnown reports whether a Node object of that name exists.
func (c *Controller) NodeKnown(name string) bool {
	_, exists, err := c.nodes.GetIndexer().GetByKey(name)
	return err == nil && exists
}

// Run creates the built-in tiers, starts the informers, workers and status
// writer, and blocks until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.queue.ShutDown()
	events := record.NewBroadcaster(record.WithContext(ctx))
	defer events.Shutdown()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	c.recorder = events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "switchyard-controller"})
	if err := c.ensureTiers(ctx); err != nil {
		return err
	}
	c.factory.Start(ctx.Done())
	c.dynFactory.Start(ctx.Done())
	// Workers start with the informers rather than after they synced, as
	// pods and namespaces already flow into the engine from their handlers:
	// a sync is level-based and a policy computed before all pods are known
	// gains the later ones incrementally, so no kind waits for the slowest
	// list. Nodes are served only once Ready.
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
	}
	// stop runs once ctx ended: it returns when workers, status writer and
	// informers are all gone.
	stop := func() {
		c.queue.ShutDown()
		wg.Wait()
		c.factory.Shutdown()
		c.dynFactory.Shutdown()
	}
	var synced []cache.DoneChecker
	for _, inf := range c.informers {
		synced = append(synced, inf.HasSyncedChecker())
	}
	// A handler has synced once it was handed every object of the initial
	// list, so after this the queue holds the rest of the backlog and the
	// pods and namespaces are in the engine. No polling: each checker
	// closes a channel.
	for _, reg := range c.handlers {
		synced = append(synced, reg.HasSyncedChecker())
	}
	synced = append(synced, c.nodes.HasSyncedChecker())
	if !cache.WaitFor(ctx, "", synced...) {
		stop()
		return fmt.Errorf("informer caches did not sync: %w", ctx.Err())
	}
	c.log.Info("informers synced")
	// The status writer starts only now, so it never reports a policy as
	// invalid for a Tier or Group that was merely not listed yet.
	wg.Go(func() { c.status.run(ctx) })
	wg.Go(func() {
		// Ready once the initial backlog is drained.
		if !c.backlog.waitEmpty(ctx) {
			return
		}
		c.readyOnce.Do(func() { close(c.ready) })
		c.log.Info("initial computation done", "stats", fmt.Sprintf("%+v", c.engine.Stats()))
	})
	<-ctx.Done()
	stop()
	return nil
}

func (c *Controller) ensureTiers(ctx context.Context) error {
	for _, t := range compute.BuiltinTiers {
		tier := &crdv1.Tier{TypeMeta: metav1.TypeMeta{APIVersion: crdv1.SchemeGroupVersion.String(), Kind: "Tier"},
			ObjectMeta: metav1.ObjectMeta{Name: t.Name}, Spec: crdv1.TierSpec{Priority: t.Priority, Description: "built-in"}}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tier)
		if err != nil {
			return err
		}
		_, err = c.dyn.Resource(crdv1.TiersResource).Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating built-in tier %s (are the CRDs from manifests/crds installed?): %w", t.Name, err)
		}
	}
	return nil
}

func (c *Controller) worker(ctx context.Context) {
	for {
		k, quit := c.queue.Get()
		if quit {
			return
		}
		start := time.Now()
		err := c.sync(k)
		c.observe(k.kind.String(), time.Since(start))
		if err != nil {
			c.log.Error("sync failed; retrying", "kind", k.kind, "namespace", k.namespace, "name", k.name, "err", err)
			c.queue.AddRateLimited(k)
		} else {
			c.queue.Forget(k)
		}
		c.queue.Done(k)
	}
}

func (c *Controller) get(k key) (runtime.Object, bool, error) {
	l := c.listers[k.kind]
	var obj runtime.Object
	var err error
	if k.namespace != "" {
		obj, err = l.ByNamespace(k.namespace).Get(k.name)
	} else {
		obj, err = l.Get(k.name)
	}
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	return obj, err == nil, err
}

func fromUnstructured[T any](obj runtime.Object) (*T, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("expected *unstructured.Unstructured, got %T", obj)
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("decoding %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}

// sync is level-based: it computes the object as the lister has it now.
// Invalid policies are not sync errors: the engine records why and the
// status writer reports it.
func (c *Controller) sync(k key) error {
	obj, exists, err := c.get(k)
	if err != nil {
		return err
	}
	e := c.engine
	switch k.kind {
	case kTier:
		if !exists {
			e.DeleteTier(k.name)
			return nil
		}
		t, err := fromUnstructured[crdv1.Tier](obj)
		if err != nil {
			return err
		}
		e.UpsertTier(t.Name, t.Spec.Priority)
	case kCNP:
		if !exists {
			e.DeleteClusterNetworkPolicy(k.name)
			return nil
		}
		p, err := fromUnstructured[crdv1.ClusterNetworkPolicy](obj)
		if err != nil {
			return err
		}
		_ = e.UpsertClusterNetworkPolicy(p)
	case kNP:
		if !exists {
			e.DeleteNativeNetworkPolicy(k.namespace, k.name)
			return nil
		}
		p, err := fromUnstructured[crdv1.NetworkPolicy](obj)
		if err != nil {
			return err
		}
		_ = e.UpsertNativeNetworkPolicy(p)
	case kClusterGroup:
		if !exists {
			e.DeleteClusterGroup(k.name)
			return nil
		}
		g, err := fromUnstructured[crdv1.ClusterGroup](obj)
		if err != nil {
			return err
		}
		e.UpsertClusterGroup(g.Name, g.Spec)
	case kGroup:
		if !exists {
			e.DeleteGroup(k.namespace, k.name)
			return nil
		}
		g, err := fromUnstructured[crdv1.Group](obj)
		if err != nil {
			return err
		}
		e.UpsertGroup(g.Namespace, g.Name, g.Spec)
	}
	return nil
}
