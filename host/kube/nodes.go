package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"switchyard.dev/switchyard/sdk"
)

// Handler receives what the Node informer sees. Calls come from one
// goroutine, in order.
type Handler interface {
	// OwnNode is called with the agent's own Node on every change, and
	// with nil when it is deleted.
	OwnNode(n *corev1.Node)
	// NodeEvent is called for every real change of another node: added,
	// its internal IPs or pod CIDRs changed, or deleted (with its last
	// known info).
	NodeEvent(kind sdk.NodeEventKind, info sdk.NodeInfo)
}

// Watch is the agent's one informer over all Nodes.
type Watch struct {
	self     string
	h        Handler
	log      *slog.Logger
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	done     chan struct{}

	// sent is what NodeEvent last reported per other node, so a relist
	// that repeats unchanged nodes produces no events. Only the handler
	// goroutine touches it, but Nodes reads it too.
	mu   sync.Mutex
	sent map[string]sdk.NodeInfo
}

// StartWatch starts the Node informer; it runs until Stop.
func StartWatch(c kubernetes.Interface, self string, h Handler, log *slog.Logger) (*Watch, error) {
	// No periodic resync: a resync would only replay the cache, and every
	// real change arrives through the watch (or the relist after a break).
	f := informers.NewSharedInformerFactory(c, 0)
	inf := f.Core().V1().Nodes().Informer()
	// Keep only what the agent reads: with thousands of Nodes, managed
	// fields, images and conditions would be most of the agent's memory.
	if err := inf.SetTransform(slim); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watch{self: self, h: h, log: log, informer: inf, cancel: cancel, done: make(chan struct{}), sent: map[string]sdk.NodeInfo{}}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.upsert(obj) },
		UpdateFunc: func(_, obj any) { w.upsert(obj) },
		DeleteFunc: w.deleted,
	}); err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer close(w.done)
		inf.Run(ctx.Done())
	}()
	return w, nil
}

// HasSynced reports whether the first list has been delivered.
func (w *Watch) HasSynced() bool { return w.informer.HasSynced() }

// Stop ends the informer and waits for it.
func (w *Watch) Stop() {
	w.cancel()
	<-w.done
}

// Nodes returns the other nodes as last reported.
func (w *Watch) Nodes() []sdk.NodeInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]sdk.NodeInfo, 0, len(w.sent))
	for _, i := range w.sent {
		out = append(out, i)
	}
	return out
}

func (w *Watch) upsert(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if n.Name == w.self {
		w.h.OwnNode(n)
		return
	}
	info := Info(n)
	w.mu.Lock()
	prev, known := w.sent[n.Name]
	if known && SameInfo(prev, info) {
		w.mu.Unlock()
		return
	}
	w.sent[n.Name] = info
	w.mu.Unlock()
	kind := sdk.NodeAdded
	if known {
		kind = sdk.NodeUpdated
	}
	w.h.NodeEvent(kind, info)
}

func (w *Watch) deleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if n.Name == w.self {
		w.h.OwnNode(nil)
		return
	}
	w.mu.Lock()
	prev, known := w.sent[n.Name]
	delete(w.sent, n.Name)
	w.mu.Unlock()
	if known {
		w.h.NodeEvent(sdk.NodeDeleted, prev)
	}
}

// slim keeps the fields of a Node the agent reads.
func slim(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
		Spec:       corev1.NodeSpec{PodCIDR: n.Spec.PodCIDR, PodCIDRs: n.Spec.PodCIDRs},
		Status:     corev1.NodeStatus{Addresses: n.Status.Addresses},
	}
	return out, nil
}

// String names the watch for logs.
func (w *Watch) String() string { return fmt.Sprintf("Node informer (self %s)", w.self) }
