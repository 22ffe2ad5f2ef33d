package tunnel

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/host/underlay"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/probe"
)

// host/underlay on a real node: eth0's address and its static route move
// to br-phy (a netdev bridge with eth0 as its port, taking eth0's MAC), the
// node still reaches its peer, and a second Setup changes nothing.
func TestUnderlaySetupMovesAddressesAndRoutes(t *testing.T) {
	c := cluster.Start(t, cluster.Options{Nodes: 2})
	n, peer := c.Nodes[0], c.Nodes[1]
	if _, err := n.Exec("ip", "route", "add", "203.0.113.0/24", "via", peer.UnderlayIP.String(), "dev", "eth0"); err != nil {
		t.Fatalf("static route: %v", err)
	}
	mac, _ := n.Exec("cat", "/sys/class/net/eth0/address")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := ovsdb.Dial(ctx, n.OVS.DBSock, "br-int", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer db.Close()
	setup := func() error {
		return netns.Do(n.NetNS, func() error {
			return underlay.Setup(ctx, db, underlay.Spec{Bridge: "br-phy", Uplink: "eth0", DatapathType: "netdev"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		})
	}
	for i := range 2 {
		if err := setup(); err != nil {
			t.Fatalf("Setup #%d: %v", i+1, err)
		}
		underlayOnBrPhy(t, n)
		if r := routeTo(t, n, mustCIDR("203.0.113.0/24")); !strings.Contains(r, "dev br-phy") {
			t.Errorf("Setup #%d: the static route did not move to br-phy: %q", i+1, r)
		}
		if got, _ := n.Exec("cat", "/sys/class/net/br-phy/address"); got != mac {
			t.Errorf("Setup #%d: br-phy MAC %q, want eth0's %q", i+1, got, mac)
		}
		if err := probe.Check(n.NetNS, probe.ICMP, peer.UnderlayIP, 0, 2*time.Second); err != nil {
			t.Errorf("Setup #%d: the node no longer reaches its peer: %v", i+1, err)
		}
	}
	if err := netns.Do(n.NetNS, func() error {
		return underlay.Setup(ctx, db, underlay.Spec{Bridge: "br-phy", Uplink: "eth9", DatapathType: "netdev"}, slog.Default())
	}); err == nil || !strings.Contains(err.Error(), `uplink "eth9"`) {
		t.Errorf("Setup with a missing uplink: %v, want an error naming it", err)
	}
}
