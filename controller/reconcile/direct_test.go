package reconcile

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"switchyard.dev/switchyard/controller/compute"
)

func TestToCachedPod(t *testing.T) {
	running := func(mod func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", Labels: map[string]string{"app": "web"}, ResourceVersion: "7",
				Annotations: map[string]string{"big": "dropped"}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "dropped",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}},
		}
		if mod != nil {
			mod(p)
		}
		return p
	}
	tests := []struct {
		name     string
		in       *corev1.Pod
		inEngine bool
	}{
		{"running with an IP", running(nil), true},
		{"not scheduled", running(func(p *corev1.Pod) { p.Spec.NodeName = "" }), false},
		{"no IP yet", running(func(p *corev1.Pod) { p.Status.PodIPs = nil }), false},
		{"host network", running(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), false},
		{"finished", running(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := toCachedPod(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			cp, ok := out.(*cachedPod)
			if !ok {
				t.Fatalf("transform returned %T, want *cachedPod", out)
			}
			if cp.inEngine != tc.inEngine {
				t.Fatalf("inEngine %v, want %v", cp.inEngine, tc.inEngine)
			}
			key, err := cache.MetaNamespaceKeyFunc(cp)
			if err != nil || key != "a/web" {
				t.Fatalf("cache key %q, %v; want a/web", key, err)
			}
			if cp.Annotations != nil || cp.ResourceVersion != "7" {
				t.Fatalf("kept annotations %v / lost resourceVersion %q", cp.Annotations, cp.ResourceVersion)
			}
			if !tc.inEngine {
				return
			}
			want := compute.Pod{Namespace: "a", Name: "web", Node: "n1", Labels: map[string]string{"app": "web"},
				IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Ports: []compute.NamedPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}}}
			if diff := cmp.Diff(want, cp.pod, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Fatalf("engine view (-want +got):\n%s", diff)
			}
			// A deep copy shares nothing the informer could mutate.
			cc := cp.DeepCopyObject().(*cachedPod)
			cc.Labels["app"] = "changed"
			cc.pod.IPs[0] = netip.MustParseAddr("10.9.9.9")
			if cp.pod.Labels["app"] != "web" || cp.pod.IPs[0] != netip.MustParseAddr("10.0.0.1") {
				t.Fatal("mutating a deep copy changed the original")
			}
			if cc.pod.Labels["app"] != "changed" {
				t.Fatal("the copy's engine view does not share the copy's labels")
			}
		})
	}
	t.Run("non-pod passes through", func(t *testing.T) {
		tomb := cache.DeletedFinalStateUnknown{Key: "a/web"}
		if out, err := toCachedPod(tomb); err != nil || out != any(tomb) {
			t.Fatalf("got %v, %v; want the tombstone unchanged", out, err)
		}
	})
}
