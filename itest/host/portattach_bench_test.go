package host

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/ovs"
)

// BenchmarkPortAttach measures what adding one pod's port costs the
// switch as the bridge fills up: the OVSDB transaction (ensure), then
// ovs-vswitchd's attach until the port has its OpenFlow number (attach),
// through the host's own OVSDB client, with 10, 50, 100 and 200 veth
// ports already on the bridge. On the userspace datapath every port
// added makes ovs-vswitchd re-read every port it has, so the attach grows
// with the bridge; a CNI ADD waits for it.
func BenchmarkPortAttach(b *testing.B) {
	sw := ovs.Start(b, ovs.Options{Name: "attach"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := ovsdb.Dial(ctx, sw.DBSock, "br-int", slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.EnsureBridge(ctx, "netdev"); err != nil {
		b.Fatal(err)
	}
	sw.AddBridgeWait(b, "br-int")
	n := 0
	addPort := func() (ensure, attach time.Duration) {
		n++
		name := fmt.Sprintf("pa%d", n)
		err := netns.Do(sw.NetNS, func() error {
			la := netlink.NewLinkAttrs()
			la.Name = name
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: name + "p"}); err != nil {
				return err
			}
			return netlink.LinkSetUp(&netlink.Veth{LinkAttrs: la})
		})
		if err != nil {
			b.Fatalf("veth %s: %v", name, err)
		}
		t0 := time.Now()
		if _, err := c.EnsurePort(ctx, ovsdb.PortSpec{Name: name, Owner: "bench"}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := c.WaitOFPort(ctx, name); err != nil {
			b.Fatal(err)
		}
		return t1.Sub(t0), time.Since(t1)
	}
	const sample = 15
	for range b.N {
		for _, size := range []int{10, 50, 100, 200} {
			for n < size {
				addPort()
			}
			var ens, att []time.Duration
			for range sample {
				e, a := addPort()
				ens, att = append(ens, e), append(att, a)
				// Let the switch settle (status and stats rounds) between
				// samples, as between two pods of a real node.
				time.Sleep(10 * time.Millisecond)
			}
			slices.Sort(ens)
			slices.Sort(att)
			b.ReportMetric(float64(ens[sample/2])/1e6, fmt.Sprintf("ports%d-ensure-ms", size))
			b.ReportMetric(float64(att[sample/2])/1e6, fmt.Sprintf("ports%d-attach-ms", size))
		}
	}
	b.ReportMetric(0, "ns/op")
}
