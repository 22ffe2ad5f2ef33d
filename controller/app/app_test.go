package app

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
	"switchyard.dev/switchyard/controller/compute"
	"switchyard.dev/switchyard/controller/internal/workload"
)

// TestControllerOverFakeClientset runs the assembled controller (the
// benchmark's setup) on the first 50 namespaces of SmallNamespaces: it must
// be Ready with everything computed, then follow a pod's creation and
// deletion through the informer into a watching node's event log.
func TestControllerOverFakeClientset(t *testing.T) {
	w := workload.SmallNamespaces()
	w.Namespaces, w.Pods, w.Policies = w.Namespaces[:50], w.Pods[:200], w.Policies[:150]
	p, kube := fakeController(w.Objects())
	stop := runUntilReady(t, p)
	defer stop()

	if st := p.engine.Stats(); st.Policies != 150 || st.Pods != 200 || st.InvalidPolicies != 0 {
		t.Fatalf("ready with %+v, want 150 policies and 200 pods", st)
	}
	first := w.Pods[0]
	snap := p.engine.Snapshot(first.Spec.NodeName)
	if !hasPolicy(snap.Policies, first.Namespace, "default-deny-all") {
		t.Fatalf("node %s of pod %s/%s was not given its namespace's default-deny-all policy; it has %d policies",
			first.Spec.NodeName, first.Namespace, first.Name, len(snap.Policies))
	}

	// A node that has no pod yet watches; a pod arrives on it and leaves.
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan *apiv1.WatchEvent, 1024)
	served := make(chan error, 1)
	go func() {
		served <- p.hub.Serve(ctx, "node-new", "", 0, func(ev *apiv1.WatchEvent) error {
			events <- ev
			return nil
		})
	}()
	defer func() {
		cancel()
		<-served
	}()
	next := func(what string, match func(*apiv1.WatchEvent) bool) {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if match(ev) {
					return
				}
			case err := <-served:
				t.Fatalf("watch of node-new ended while waiting for %s: %v", what, err)
			case <-time.After(time.Minute):
				// A liveness guard, not a timing assertion: it turns a
				// lost event into a failure instead of a hung test.
				t.Fatalf("no %s for node-new within a minute", what)
			}
		}
	}
	next("the initial Synced", func(ev *apiv1.WatchEvent) bool { return ev.GetSynced() != nil })

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns-0", Name: "new", Labels: map[string]string{"app-1": "scale-1"}},
		Spec:       corev1.PodSpec{NodeName: "node-new"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.200.0.1"}}},
	}
	if _, err := kube.CoreV1().Pods("ns-0").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	next("an AppliedToGroup holding the new pod", func(ev *apiv1.WatchEvent) bool {
		for _, m := range ev.GetAppliedToGroupUpsert().GetMembers() {
			if m.GetNamespace() == "ns-0" && m.GetName() == "new" {
				return true
			}
		}
		return false
	})
	if err := kube.CoreV1().Pods("ns-0").Delete(ctx, "new", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next("ns-0/default-deny-all leaving the node", func(ev *apiv1.WatchEvent) bool {
		return ev.GetPolicyDelete() != "" && strings.HasSuffix(ev.GetPolicyDelete(), "ns-0/default-deny-all")
	})
}

// TestControllerReportsInvalidNetworkPolicy: a NetworkPolicy the engine
// cannot compute as written gets a Warning Event on the object.
func TestControllerReportsInvalidNetworkPolicy(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-0"}}
	p, kube := fakeController([]apiruntime.Object{ns})
	stop := runUntilReady(t, p)
	defer stop()

	ctx := context.Background()
	watch, err := kube.CoreV1().Events("ns-0").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	bad := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns-0", Name: "bad-cidr"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}}},
		}}},
	}
	if _, err := kube.NetworkingV1().NetworkPolicies("ns-0").Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev := <-watch.ResultChan():
			e, ok := ev.Object.(*corev1.Event)
			if !ok || e.Reason != "InvalidPolicy" {
				continue
			}
			if e.InvolvedObject.Name != "bad-cidr" || e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "10.0.0.0/33") {
				t.Fatalf("event %s %s on %s: %q; want a Warning on bad-cidr naming the CIDR", e.Type, e.Reason, e.InvolvedObject.Name, e.Message)
			}
			return
		case <-time.After(time.Minute):
			// A liveness guard, not a timing assertion.
			t.Fatal("no InvalidPolicy event for ns-0/bad-cidr within a minute")
		}
	}
}

func hasPolicy(ps []*compute.Policy, ns, name string) bool {
	for _, p := range ps {
		if p.Namespace == ns && p.Name == name {
			return true
		}
	}
	return false
}
