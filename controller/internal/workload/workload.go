// Package workload generates the cluster states the controller benchmarks
// run on: the shapes of Antrea's controller scale tests (SmallNamespaces,
// LargeNamespaces, OneNamespace, NetpolPerPod, ClusterScopedNetpol), so the
// figures compare side by side. Pods get random (seeded, reproducible) IPs
// and one of 1,000 node names; every policy has both policy types.
package workload

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Workload is a generated cluster state.
type Workload struct {
	Namespaces []*corev1.Namespace
	Pods       []*corev1.Pod
	Policies   []*networkingv1.NetworkPolicy
}

// Objects lists every object, namespaces first, as a fake clientset is
// preloaded with them.
func (w Workload) Objects() []runtime.Object {
	objs := make([]runtime.Object, 0, len(w.Namespaces)+len(w.Pods)+len(w.Policies))
	for _, n := range w.Namespaces {
		objs = append(objs, n)
	}
	for _, p := range w.Pods {
		objs = append(objs, p)
	}
	for _, p := range w.Policies {
		objs = append(objs, p)
	}
	return objs
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

// SmallNamespaces: 25,000 namespaces, each with 4 pods and 3 policies.
func SmallNamespaces() Workload {
	g, w := newGen(), Workload{}
	for i := range 25000 {
		ns := "ns-" + strconv.Itoa(i)
		w.Namespaces = append(w.Namespaces, nsObj(ns, map[string]string{"app": ns}))
		for j := range 4 {
			k := strconv.Itoa(j/2 + 1)
			w.Pods = append(w.Pods, g.pod(ns, "pod-"+strconv.Itoa(j), map[string]string{"app-" + k: "scale-" + k}))
		}
		w.Policies = append(w.Policies, np(ns, "default-deny-all", ml(), nil))
		for _, k := range []string{"1", "2"} {
			w.Policies = append(w.Policies, np(ns, "np-"+k, ml("app-"+k, "scale-"+k), &networkingv1.NetworkPolicyPeer{PodSelector: ml("app-"+k, "scale-"+k)}))
		}
	}
	return w
}

// LargeNamespaces: 100 namespaces, each with 1,000 pods and 101 policies.
func LargeNamespaces() Workload {
	g, w := newGen(), Workload{}
	for i := range 100 {
		ns := "ns-" + strconv.Itoa(i)
		w.Namespaces = append(w.Namespaces, nsObj(ns, map[string]string{"app": ns}))
		w.Policies = append(w.Policies, np(ns, "default-deny-all", ml(), nil))
		for j := range 100 {
			k := strconv.Itoa(j)
			w.Policies = append(w.Policies, np(ns, "np-"+k, ml("app-"+k, "scale-"+k), &networkingv1.NetworkPolicyPeer{PodSelector: ml("app-"+k, "scale-"+k)}))
			for p := range 10 {
				w.Pods = append(w.Pods, g.pod(ns, "pod-"+k+"-"+strconv.Itoa(p), map[string]string{"app-" + k: "scale-" + k}))
			}
		}
	}
	return w
}

// OneNamespace: 10,000 pods and 10,000 identical policies.
func OneNamespace() Workload {
	g, w := newGen(), Workload{}
	w.Namespaces = append(w.Namespaces, nsObj("one", map[string]string{"app": "one"}))
	for i := range 10000 {
		w.Pods = append(w.Pods, g.pod("one", "pod-"+strconv.Itoa(i), map[string]string{"app-1": "scale-1"}))
		w.Policies = append(w.Policies, np("one", "np-"+strconv.Itoa(i), ml("app-1", "scale-1"), &networkingv1.NetworkPolicyPeer{PodSelector: ml("app-1", "scale-1")}))
	}
	return w
}

// NetpolPerPod: 10,000 pods in pairs, one policy per pod admitting its partner.
func NetpolPerPod() Workload {
	g, w := newGen(), Workload{}
	w.Namespaces = append(w.Namespaces, nsObj("one", map[string]string{"app": "one"}))
	for i := range 10000 {
		w.Pods = append(w.Pods, g.pod("one", "pod-"+strconv.Itoa(i), map[string]string{"app": "p" + strconv.Itoa(i)}))
		partner := "p" + strconv.Itoa(i^1)
		w.Policies = append(w.Policies, np("one", "np-"+strconv.Itoa(i), ml("app", "p"+strconv.Itoa(i)), &networkingv1.NetworkPolicyPeer{PodSelector: ml("app", partner)}))
	}
	return w
}

// ClusterScopedNetpol: 1,000 namespaces in 100 companies, 10 policies and
// 100 pods each; peers are selected by namespace label.
func ClusterScopedNetpol() Workload {
	g, w := newGen(), Workload{}
	for i := range 1000 {
		ns := "ns-" + strconv.Itoa(i)
		company := "company-" + strconv.Itoa(i%100)
		w.Namespaces = append(w.Namespaces, nsObj(ns, map[string]string{"company": company}))
		for j := range 10 {
			k := "scale-" + strconv.Itoa(j)
			w.Policies = append(w.Policies, np(ns, "np-"+strconv.Itoa(j), ml("app", k),
				&networkingv1.NetworkPolicyPeer{NamespaceSelector: ml("company", company), PodSelector: ml("app", k)}))
			for p := range 10 {
				w.Pods = append(w.Pods, g.pod(ns, "pod-"+strconv.Itoa(j)+"-"+strconv.Itoa(p), map[string]string{"app": k}))
			}
		}
	}
	return w
}
