package reconcile

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"switchyard.dev/switchyard/controller/compute"
)

// cachedPod is what the Pod informer keeps instead of a Pod: the cache key's
// metadata and the engine's view of the pod, converted once when the object
// arrives. A cluster's pods are the bulk of the controller's memory, and a
// corev1.Pod struct costs over a kilobyte even with every field we do not
// read cleared.
type cachedPod struct {
	metav1.ObjectMeta
	pod compute.Pod
	// inEngine: the pod takes part in policy (see compute.PodFromKubernetes).
	inEngine bool
}

var _ runtime.Object = (*cachedPod)(nil)

// GetObjectKind: a cachedPod never leaves the process, so it has no kind.
func (*cachedPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (p *cachedPod) DeepCopyObject() runtime.Object {
	out := &cachedPod{pod: p.pod, inEngine: p.inEngine}
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.pod.IPs = slices.Clone(p.pod.IPs)
	out.pod.Ports = slices.Clone(p.pod.Ports)
	out.pod.Labels = out.Labels
	return out
}

// toCachedPod is the Pod informer's transform. It passes anything that is
// not a Pod through unchanged (a cachedPod is already transformed).
func toCachedPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &cachedPod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, UID: p.UID, ResourceVersion: p.ResourceVersion}}
	out.pod, out.inEngine = compute.PodFromKubernetes(p)
	return out, nil
}

// Pods go from the informer's handler straight into the engine, without the
// workqueue: the handler already holds the object as the cache has it, the
// conversion was done by the transform and cannot fail, and the engine call
// is the whole sync. A queue would add a key, a map insert and a lister
// read per event and retry nothing. The informer calls a handler for one
// object at a time and in order, so the engine sees each pod's latest state.
func (c *Controller) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    c.podChanged,
		UpdateFunc: func(_, obj any) { c.podChanged(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			m, err := metaOf(obj)
			if err != nil {
				c.log.Error("pod informer delivered a deletion without metadata", "err", err)
				return
			}
			c.engine.DeletePod(m.GetNamespace(), m.GetName())
		},
	}
}

func (c *Controller) podChanged(obj any) {
	p, ok := obj.(*cachedPod)
	if !ok {
		c.log.Error("pod informer delivered an untransformed object", "type", fmt.Sprintf("%T", obj))
		return
	}
	if p.inEngine {
		c.engine.UpsertPod(p.pod)
	} else {
		c.engine.DeletePod(p.Namespace, p.Name)
	}
}

// Namespaces go straight into the engine for the same reasons as pods.
func (c *Controller) namespaceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    c.namespaceChanged,
		UpdateFunc: func(_, obj any) { c.namespaceChanged(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			m, err := metaOf(obj)
			if err != nil {
				c.log.Error("namespace informer delivered a deletion without metadata", "err", err)
				return
			}
			c.engine.DeleteNamespace(m.GetName())
		},
	}
}

func (c *Controller) namespaceChanged(obj any) {
	m, err := metaOf(obj)
	if err != nil {
		c.log.Error("namespace informer delivered an object without metadata", "err", err)
		return
	}
	c.engine.UpsertNamespace(m.GetName(), m.GetLabels())
}

// Kubernetes NetworkPolicies go straight into the engine too: computing one
// never fails in a way a retry could fix (an invalid policy is computed as
// isolating with nothing allowed, and reported), and the engine serializes
// every input on one lock, so workers would add no parallelism. The queue
// is left to the native kinds, whose decoding can fail.
func (c *Controller) k8sPolicyHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    c.k8sPolicyChanged,
		UpdateFunc: func(_, obj any) { c.k8sPolicyChanged(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			m, err := metaOf(obj)
			if err != nil {
				c.log.Error("NetworkPolicy informer delivered a deletion without metadata", "err", err)
				return
			}
			c.engine.DeleteKubernetesNetworkPolicy(m.GetNamespace(), m.GetName())
		},
	}
}

func (c *Controller) k8sPolicyChanged(obj any) {
	np, ok := obj.(*networkingv1.NetworkPolicy)
	if !ok {
		c.log.Error("NetworkPolicy informer delivered another type", "type", fmt.Sprintf("%T", obj))
		return
	}
	if err := c.engine.UpsertKubernetesNetworkPolicy(np); err != nil {
		// Never silently: the engine failed closed (the selected pods stay
		// isolated with nothing allowed), and the owner must learn why
		// their traffic stopped.
		c.log.Warn("NetworkPolicy invalid: its pods are isolated with no traffic allowed until it is fixed",
			"policy", np.Namespace+"/"+np.Name, "err", err)
		c.recorder.Eventf(np, corev1.EventTypeWarning, "InvalidPolicy",
			"not enforced as written: %v; the selected pods are isolated with no traffic allowed until the policy is fixed", err)
	}
}
