package egress

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// The egress plugin's policy routing, as its defaults place it
// (plugins/egress/hostnet/route.go).
const (
	routeRulePriority = 1100
	routeTableBase    = 1100
	routeNFTable      = "switchyard-egress-route"
)

// TestSubnetInfo: an ExternalIPPool with subnetInfo sends its Egress
// traffic through the subnet's gateway. The only way to the server
// (203.0.113.10) is a router on the underlay that holds 198.18.1.1/24, a
// subnet no node has an address or route in; the pool's addresses are in
// that subnet. Selected pods on every node reach the server and are seen
// with the Egress IP; the others have no route. A pool whose ranges lie
// outside its gateway's subnet is refused with a condition that says so.
// Unloading the plugin on the holder and deleting the Egress remove the
// rule, the routes and the nftables table.
func TestSubnetInfo(t *testing.T) {
	var gone []string // namespaces that must be gone once every cleanup ran
	t.Cleanup(func() {
		for _, ns := range gone {
			if _, err := os.Stat(netns.Path(ns)); err == nil {
				t.Errorf("cleanup left network namespace %s", ns)
			}
		}
	})
	e := start(t, 3)
	rx := e.c.AddRoutedExternal(t, "198.18.1.1/24", "203.0.113.10/24")
	gone = append(gone, rx.RouterNS, rx.ServerNS, e.c.Fabric)
	for _, n := range e.c.Nodes {
		gone = append(gone, n.NetNS)
	}
	whoami(t, rx.ServerNS, whoamiPort)
	server := rx.ServerIP

	var web, plain []*cluster.Pod
	for _, n := range e.c.Nodes {
		web = append(web, e.c.AddPod(t, cluster.PodSpec{Name: fmt.Sprintf("rweb-%d", n.Index), Namespace: namespace, Node: n, Labels: map[string]string{"app": "rweb"}}))
		plain = append(plain, e.c.AddPod(t, cluster.PodSpec{Name: fmt.Sprintf("rplain-%d", n.Index), Namespace: namespace, Node: n, Labels: map[string]string{"app": "rplain"}}))
	}
	for _, p := range append(slices.Clone(web), plain...) {
		gone = append(gone, p.NetNS)
	}
	// No Egress yet: no pod has a way to the server.
	for _, p := range []*cluster.Pod{web[0], plain[0]} {
		if got, err := seenAt(p.NetNS, server, 2*time.Second); err == nil {
			t.Fatalf("before any Egress %s reached %s (seen as %s); the nodes must have no route there", p.Key(), server, got)
		}
	}

	e.createPool(t, &crdv1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "routed"},
		Spec: crdv1.ExternalIPPoolSpec{IPRanges: []crdv1.IPRange{{CIDR: "198.18.1.64/28"}},
			SubnetInfo: &crdv1.SubnetInfo{Gateway: rx.Gateway.String(), PrefixLength: int32(rx.Subnet.Bits())}}})
	e.createEgress(t, &crdv1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "routed"},
		Spec: crdv1.EgressSpec{ExternalIPPool: "routed", AppliedTo: crdv1.EgressAppliedTo{PodSelector: selector("app", "rweb")}}})
	eg := e.waitCondition(t, "routed", crdv1.ConditionIPAllocated, metav1.ConditionTrue, crdv1.ReasonAllocated)
	eip := eg.Status.EgressIP
	if eip != "198.18.1.65" {
		t.Fatalf("Egress routed got %q, want the pool's first address 198.18.1.65", eip)
	}
	eg = e.waitCondition(t, "routed", crdv1.ConditionIPAssigned, metav1.ConditionTrue, crdv1.ReasonAssigned)
	holder := e.c.Node(eg.Status.EgressNode)
	t.Logf("Egress routed: %s held by %s", eip, holder.Name)

	t.Run("selected pods on every node reach the server through the gateway", func(t *testing.T) {
		want := map[*cluster.Pod]string{}
		for _, p := range web {
			want[p] = eip
		}
		expectSeenAt(t, "Egress routed", server, want)
		// Witnesses on the holder: the rule, the table, the mark table.
		r := nodeRouting(t, holder)
		t.Logf("%s: rules %v, routes %v, nftables %s: %v", holder.Name, r.rules, r.routes, routeNFTable, r.markTable)
		if len(r.rules) != 1 || len(r.routes) != 2 || !r.markTable {
			t.Fatalf("%s: want one rule, two routes and the table %s; got %+v", holder.Name, routeNFTable, r)
		}
		table := strings.Fields(r.rules[0])[3]
		for _, w := range []string{"table " + table + " 198.18.1.0/24 dev ", "table " + table + " 0.0.0.0/0 via 198.18.1.1 dev "} {
			if !slices.ContainsFunc(r.routes, func(s string) bool { return strings.HasPrefix(s, w) }) {
				t.Errorf("%s: no route %q... in %v", holder.Name, w, r.routes)
			}
		}
		if out, err := holder.Exec("nft", "list", "tables"); err != nil || !strings.Contains(out, "table ip "+routeNFTable) {
			t.Errorf("%s: nft list tables: %v\n%s", holder.Name, err, out)
		}
		// The other nodes route nothing.
		for _, n := range e.c.Nodes {
			if n != holder {
				if r := nodeRouting(t, n); !r.empty() {
					t.Errorf("%s holds nothing but has %+v", n.Name, r)
				}
			}
		}
	})

	t.Run("unselected pods have no route to the server", func(t *testing.T) {
		for _, p := range plain {
			got, err := seenAt(p.NetNS, server, 2*time.Second)
			if err == nil {
				t.Errorf("%s (not selected) reached %s, seen as %s", p.Key(), server, got)
				continue
			}
			t.Logf("%s (not selected): %v", p.Key(), err)
		}
	})

	t.Run("a subnetInfo the ranges are outside of gets a condition", func(t *testing.T) {
		e.createPool(t, &crdv1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "misrouted"},
			Spec: crdv1.ExternalIPPoolSpec{IPRanges: []crdv1.IPRange{{CIDR: "198.18.2.64/28"}},
				SubnetInfo: &crdv1.SubnetInfo{Gateway: "198.18.1.1", PrefixLength: 24}}})
		e.createEgress(t, &crdv1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "misrouted"},
			Spec: crdv1.EgressSpec{ExternalIPPool: "misrouted", AppliedTo: crdv1.EgressAppliedTo{PodSelector: selector("app", "none")}}})
		bad := e.waitCondition(t, "misrouted", crdv1.ConditionIPAllocated, metav1.ConditionFalse, crdv1.ReasonPoolInvalid)
		c := meta.FindStatusCondition(bad.Status.Conditions, crdv1.ConditionIPAllocated)
		t.Logf("misrouted: %s", c.Message)
		for _, w := range []string{"ExternalIPPool misrouted is invalid", "ipRanges[0] (198.18.2.64/28) is not inside the subnet 198.18.1.0/24"} {
			if !strings.Contains(c.Message, w) {
				t.Errorf("IPAllocated message %q does not say %q", c.Message, w)
			}
		}
		if bad.Status.EgressIP != "" {
			t.Errorf("Egress misrouted got %s from an invalid pool", bad.Status.EgressIP)
		}
		e.deleteEgress(t, "misrouted")
		e.deletePool(t, "misrouted")
	})

	t.Run("unloading the plugin on the holder removes its routing; the new holder routes", func(t *testing.T) {
		e.agents[holder.Name].Disable(t, "egress")
		expectNoRouting(t, holder, "egress unloaded")
		err := testenv.Eventually("another node holds "+eip, 20*time.Second, 100*time.Millisecond, func() error {
			if n := e.getEgress(t, "routed").Status.EgressNode; n == holder.Name || n == "" {
				return fmt.Errorf("egressNode %q", n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		old := holder
		holder = e.c.Node(e.getEgress(t, "routed").Status.EgressNode)
		t.Logf("%s moved from %s to %s", eip, old.Name, holder.Name)
		want := map[*cluster.Pod]string{}
		for _, p := range web {
			if p.Node != old { // old's pods have no egress plugin any more
				want[p] = eip
			}
		}
		expectSeenAt(t, "after the move", server, want)
		if r := nodeRouting(t, holder); len(r.rules) != 1 || len(r.routes) != 2 || !r.markTable {
			t.Errorf("new holder %s: %+v", holder.Name, r)
		}
	})

	t.Run("deleting the Egress removes the rule, the routes and the nftables table", func(t *testing.T) {
		e.deleteEgress(t, "routed")
		expectNoRouting(t, holder, "Egress deleted")
		if out, err := holder.Exec("nft", "list", "tables"); err != nil || strings.Contains(out, routeNFTable) {
			t.Errorf("%s: nft list tables after the Egress is gone: %v\n%s", holder.Name, err, out)
		}
		for _, p := range web {
			if got, err := seenAt(p.NetNS, server, 2*time.Second); err == nil {
				t.Errorf("%s reached %s (seen as %s) with no Egress", p.Key(), server, got)
			}
		}
	})
}

func (e *env) deletePool(t testing.TB, name string) {
	t.Helper()
	if err := e.dyn.Resource(crdv1.ExternalIPPoolsResource).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting ExternalIPPool %s: %v", name, err)
	}
}

// routing is the egress plugin's policy routing found on a node.
type routing struct {
	rules, routes []string
	markTable     bool
}

func (r routing) empty() bool { return len(r.rules) == 0 && len(r.routes) == 0 && !r.markTable }

// nodeRouting reads, with netlink in the node's namespace, the rules at
// the plugin's priority into its table range, the routes of those
// tables, and whether the nftables mark table is there.
func nodeRouting(t testing.TB, n *cluster.Node) routing {
	t.Helper()
	var r routing
	own := func(table int) bool { return table > routeTableBase && table <= routeTableBase+255 }
	err := netns.Do(n.NetNS, func() error {
		rules, err := netlink.RuleList(netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, x := range rules {
			if x.Priority == routeRulePriority && own(x.Table) {
				var mask uint32
				if x.Mask != nil {
					mask = *x.Mask
				}
				r.rules = append(r.rules, fmt.Sprintf("fwmark %#x/%#x lookup %d", x.Mark, mask, x.Table))
			}
		}
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		for _, x := range routes {
			if !own(x.Table) {
				continue
			}
			s := fmt.Sprintf("table %d %s", x.Table, x.Dst)
			if x.Gw != nil {
				s += " via " + x.Gw.String()
			}
			if l, err := netlink.LinkByIndex(x.LinkIndex); err == nil {
				s += " dev " + l.Attrs().Name
			}
			r.routes = append(r.routes, s)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: reading rules and routes: %v", n.Name, err)
	}
	f, err := os.Open(netns.Path(n.NetNS))
	if err != nil {
		t.Fatalf("opening netns %s: %v", n.NetNS, err)
	}
	defer f.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		t.Fatalf("nftables in %s: %v", n.NetNS, err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatalf("listing nftables tables in %s: %v", n.NetNS, err)
	}
	for _, tb := range tables {
		r.markTable = r.markTable || tb.Name == routeNFTable
	}
	return r
}

// expectNoRouting waits until the node has none of the plugin's policy
// routing left.
func expectNoRouting(t testing.TB, n *cluster.Node, what string) {
	t.Helper()
	var last routing
	err := testenv.Eventually(what+": no Egress policy routing on "+n.Name, 20*time.Second, 100*time.Millisecond, func() error {
		if last = nodeRouting(t, n); !last.empty() {
			return fmt.Errorf("left: %+v", last)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
