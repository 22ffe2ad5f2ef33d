package cniserver

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/host/ifstore"
	"switchyard.dev/switchyard/sdk"
)

type noPorts struct{}

func (noPorts) OFPort(context.Context, string) (uint32, bool, error) { return 0, false, nil }

func TestStartNodePublishesAndReconciles(t *testing.T) {
	dir := t.TempDir()
	// A record left from before a restart whose port is gone.
	old, _ := ifstore.Open(dir+"/interfaces.json", nil)
	old.Put(ifstore.Interface{PodNamespace: "ns", PodName: "gone", ContainerID: "c0", IfName: "eth0", HostIfName: "syc0",
		IPs: []netip.Addr{netip.MustParseAddr("10.0.0.9")}})

	p := &plugin{}
	var mu sync.Mutex
	var events []string
	got := make(chan struct{}, 10)
	n, err := StartNode(context.Background(), NodeOptions{
		SocketDir: dir, StateDir: dir, Ports: noPorts{},
		Handler: func() (Plugin, bool) { return p, true },
		Publish: func(_ context.Context, e sdk.PodInterfaceEventRequest) {
			mu.Lock()
			events = append(events, e.Interface.ContainerID)
			mu.Unlock()
			got <- struct{}{}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(time.Second)
	if recs := n.Store.List(); len(recs) != 0 {
		t.Errorf("stale record survived reconcile: %+v", recs)
	}
	if err := n.Store.Put(ifstore.Interface{PodNamespace: "ns", PodName: "new", ContainerID: "c1", IfName: "eth0", HostIfName: "syc1", OFPort: 3}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no pod interface event within 10s")
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"c1"}, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
