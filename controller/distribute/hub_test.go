package distribute

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
	"switchyard.dev/switchyard/controller/compute"
)

func kind(ev *apiv1.WatchEvent) string {
	switch x := ev.Event.(type) {
	case *apiv1.WatchEvent_Reset_:
		return "reset"
	case *apiv1.WatchEvent_Resumed:
		return "resumed"
	case *apiv1.WatchEvent_Synced:
		return "synced"
	case *apiv1.WatchEvent_PolicyUpsert:
		return "policy " + x.PolicyUpsert.Uid
	case *apiv1.WatchEvent_AddressGroupPatch:
		return fmt.Sprintf("ag-patch +%d -%d", len(x.AddressGroupPatch.Added), len(x.AddressGroupPatch.Removed))
	case *apiv1.WatchEvent_AddressGroupUpsert:
		return fmt.Sprintf("ag %d", len(x.AddressGroupUpsert.Members))
	case *apiv1.WatchEvent_AppliedToGroupUpsert:
		return fmt.Sprintf("atg %d", len(x.AppliedToGroupUpsert.Members))
	}
	return fmt.Sprintf("%T", ev.Event)
}

// stream runs Serve in the background; events arrive on the channel.
func stream(t *testing.T, h *Hub, node, epoch string, version uint64, block <-chan struct{}) (<-chan *apiv1.WatchEvent, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan *apiv1.WatchEvent, 1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.Serve(ctx, node, epoch, version, func(ev *apiv1.WatchEvent) error {
			if block != nil {
				select {
				case <-block:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			ch <- ev
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ch, cancel
}

func next(t *testing.T, ch <-chan *apiv1.WatchEvent, n int) []*apiv1.WatchEvent {
	t.Helper()
	var out []*apiv1.WatchEvent
	for len(out) < n {
		select {
		case ev := <-ch:
			out = append(out, ev)
		case <-time.After(10 * time.Second):
			t.Fatalf("waited 10s for %d events, got %d: %v", n, len(out), kinds(out))
		}
	}
	return out
}

func kinds(evs []*apiv1.WatchEvent) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, kind(ev))
	}
	return out
}

var ipN byte

func pod(e *compute.Engine, name, node, app string) {
	ipN++
	e.UpsertPod(compute.Pod{Namespace: "ns", Name: name, Node: node, Labels: map[string]string{"app": app}, IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, ipN})}})
}

func setup(t *testing.T, logSize int) (*compute.Engine, *Hub) {
	e := compute.New(nil)
	h := NewHub(e, nil, logSize)
	pod(e, "server", "n1", "server")
	pod(e, "client", "n2", "client")
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "allow"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}}}}}}
	if err := e.UpsertKubernetesNetworkPolicy(np); err != nil {
		t.Fatal(err)
	}
	return e, h
}

func TestSnapshotThenIncrementalThenResume(t *testing.T) {
	e, h := setup(t, 100)
	ch, cancel := stream(t, h, "n1", "", 0, nil)
	snap := next(t, ch, 5)
	if diff := cmp.Diff([]string{"reset", "atg 1", "ag 1", "policy k8s:ns/allow", "synced"}, kinds(snap)); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}
	pod(e, "client2", "n2", "client")
	ev := next(t, ch, 1)[0]
	if kind(ev) != "ag-patch +1 -0" || ev.Version != snap[4].Version+1 {
		t.Fatalf("incremental event %s version %d after snapshot version %d", kind(ev), ev.Version, snap[4].Version)
	}
	cancel()
	// Missed while disconnected: one more client.
	pod(e, "client3", "n2", "client")
	ch2, _ := stream(t, h, "n1", ev.Epoch, ev.Version, nil)
	got := next(t, ch2, 3)
	if diff := cmp.Diff([]string{"resumed", "synced", "ag-patch +1 -0"}, kinds(got)); diff != "" {
		t.Fatalf("resume (-want +got):\n%s", diff)
	}
	ch3, _ := stream(t, h, "n1", "other-epoch", 3, nil)
	got = next(t, ch3, 1)
	if r := got[0].GetReset_(); r == nil || !strings.Contains(r.Reason, "no longer held") {
		t.Fatalf("unknown epoch: got %s, want a reset saying the history is gone", kind(got[0]))
	}
}

func TestSlowNodeGetsResnapshotAndOthersFlow(t *testing.T) {
	e, h := setup(t, 4)
	block := make(chan struct{})
	slow, _ := stream(t, h, "n1", "", 0, block)
	block <- struct{}{} // let the reset through; the slow node then stalls
	if k := kind(next(t, slow, 1)[0]); k != "reset" {
		t.Fatalf("first event %s", k)
	}
	fast, _ := stream(t, h, "n2", "", 0, nil)
	next(t, fast, 2) // n2 has no policy: reset, synced
	for i := range 20 {
		pod(e, fmt.Sprintf("c%d", i), "n2", "client")
	}
	// The slow node's log (4 events) overflowed; when it catches up it must
	// be resnapshotted rather than miss events.
	close(block)
	var seen []*apiv1.WatchEvent
	for {
		ev := next(t, slow, 1)[0]
		seen = append(seen, ev)
		if r := ev.GetReset_(); r != nil && strings.Contains(r.Reason, "too slow") {
			break
		}
		if len(seen) > 30 {
			t.Fatalf("slow node was not resnapshotted: %v", kinds(seen))
		}
	}
	// The fresh snapshot holds all 21 clients.
	if diff := cmp.Diff([]string{"atg 1", "ag 21", "policy k8s:ns/allow", "synced"}, kinds(next(t, slow, 4))); diff != "" {
		t.Fatalf("resnapshot (-want +got):\n%s", diff)
	}
}

func TestIdleNodeLogExpires(t *testing.T) {
	e, h := setup(t, 100)
	h.Retain = 10 * time.Millisecond
	ch, cancel := stream(t, h, "n1", "", 0, nil)
	first := next(t, ch, 5)
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for h.Nodes() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("waited 10s for the idle node log to expire")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The engine no longer emits for n1, and a resume of the expired epoch
	// gets a fresh snapshot.
	pod(e, "client9", "n2", "client")
	ch2, _ := stream(t, h, "n1", first[4].Epoch, first[4].Version, nil)
	if diff := cmp.Diff([]string{"reset", "atg 1", "ag 2", "policy k8s:ns/allow", "synced"}, kinds(next(t, ch2, 5))); diff != "" {
		t.Fatalf("after expiry (-want +got):\n%s", diff)
	}
}
