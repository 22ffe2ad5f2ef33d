package feature

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/plugins/egress/placement"
)

func TestDesired(t *testing.T) {
	ip := netip.MustParseAddr
	s := Snapshot{
		Self: "n1",
		Nodes: map[string]NodeView{
			"n1": {Labels: labels.Set{"egress": "yes"}, IP: ip("198.18.0.1")},
			"n2": {Labels: labels.Set{"egress": "yes"}, IP: ip("198.18.0.2")},
			"n3": {Labels: labels.Set{}, IP: ip("198.18.0.3")},
		},
		Alive: map[string]bool{"n1": true, "n2": true, "n3": true},
		Pools: map[string]labels.Selector{"p": labels.SelectorFromSet(labels.Set{"egress": "yes"})},
		Pods: []PodView{
			{Namespace: "a", Name: "web-1", Node: "n1", Labels: labels.Set{"app": "web"}, IPs: []netip.Addr{ip("10.244.1.2")}},
			{Namespace: "a", Name: "web-3", Node: "n3", Labels: labels.Set{"app": "web"}, IPs: []netip.Addr{ip("10.244.3.2")}},
			{Namespace: "a", Name: "db-1", Node: "n1", Labels: labels.Set{"app": "db"}, IPs: []netip.Addr{ip("10.244.1.3")}},
		},
		Namespaces: map[string]labels.Set{"a": {}},
	}
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	s.Egresses = []EgressView{{Name: "e", IPs: []netip.Addr{ip("198.18.0.100")}, Pool: "p", Pods: web}}
	// The holder is one of the pool's nodes, never n3; a dead node is never chosen.
	for _, alive := range []map[string]bool{{"n1": true, "n2": true, "n3": true}, {"n1": true, "n3": true}} {
		s.Alive = alive
		plan := Desired(s, placement.NewRing)
		h := plan.Placements[0].Holder
		if h == "n3" || !alive[h] {
			t.Fatalf("alive %v: holder %q", alive, h)
		}
		if got := plan.Placements[0].Pods; len(got) != 2 {
			t.Errorf("selected %v, want the two web pods", got)
		}
		if h == "n1" {
			// n1 holds: its own pod and n3's tunnelled one are marked here.
			if len(plan.Held[ip("198.18.0.100")]) != 2 || len(plan.Pods) != 2 {
				t.Errorf("holder n1: held %v, pods %+v", plan.Held, plan.Pods)
			}
		} else {
			// n2 holds: only n1's own pod has a flow here, into the tunnel to n2.
			if len(plan.Held) != 0 || len(plan.Pods) != 1 || plan.Pods[0].Holder != ip("198.18.0.2") || !plan.Pods[0].Local {
				t.Errorf("holder n2: held %v, pods %+v", plan.Held, plan.Pods)
			}
		}
	}
	// An older Egress claims the pod first.
	s.Alive = map[string]bool{"n1": true, "n2": true, "n3": true}
	s.Egresses = append(s.Egresses, EgressView{Name: "old", Created: time.Unix(1, 0).Add(-time.Hour), IPs: []netip.Addr{ip("198.18.0.101")}, Pool: "p", Pods: web})
	s.Egresses[0].Created = time.Unix(1, 0)
	plan := Desired(s, placement.NewRing)
	if plan.Placements[0].Egress != "old" || len(plan.Placements[0].Pods) != 2 || len(plan.Placements[1].Pods) != 0 {
		t.Errorf("placements %+v: want the older Egress to claim both pods", plan.Placements)
	}
	// No live node allowed: no holder, no flows.
	s.Alive = map[string]bool{"n3": true}
	s.Self = "n3"
	if plan := Desired(s, placement.NewRing); plan.Placements[0].Holder != "" || len(plan.Pods) != 0 {
		t.Errorf("no eligible node: %+v", plan)
	}
}

// A dual-stack Egress: both IPs on one holder, each marking the pods'
// addresses of its family; one bandwidth limit for both. An IPv4-only
// Egress leaves the pods' IPv6 traffic alone, and a younger IPv6 Egress
// may take it.
func TestDesiredDualStack(t *testing.T) {
	ip := netip.MustParseAddr
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	s := Snapshot{
		Self:  "n1",
		Nodes: map[string]NodeView{"n1": {IP: ip("198.18.0.1")}, "n2": {IP: ip("198.18.0.2")}},
		Alive: map[string]bool{"n1": true},
		Pods: []PodView{
			{Namespace: "a", Name: "web-1", Node: "n1", Labels: labels.Set{"app": "web"}, IPs: []netip.Addr{ip("10.244.1.2"), ip("fd00:10:244:1::2")}},
			{Namespace: "a", Name: "web-2", Node: "n2", Labels: labels.Set{"app": "web"}, IPs: []netip.Addr{ip("10.244.2.2"), ip("fd00:10:244:2::2")}},
		},
		Namespaces: map[string]labels.Set{"a": {}},
	}
	v4, v6 := ip("198.18.0.100"), ip("fd00:198:18::100")
	s.Egresses = []EgressView{{Name: "dual", IPs: []netip.Addr{v4, v6}, Pods: web, Bandwidth: Bandwidth{RateKbps: 1000, BurstKbit: 100}}}
	plan := Desired(s, placement.NewRing)
	if h := plan.Placements[0].Holder; h != "n1" {
		t.Fatalf("holder %q, want n1 (the only live node)", h)
	}
	wantHeld := map[netip.Addr][]netip.Addr{
		v4: {ip("10.244.1.2"), ip("10.244.2.2")},
		v6: {ip("fd00:10:244:1::2"), ip("fd00:10:244:2::2")},
	}
	if d := cmp.Diff(wantHeld, plan.Held, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("held (-want +got):\n%s", d)
	}
	if len(plan.Pods) != 4 || len(plan.Placements[0].Pods) != 2 {
		t.Errorf("pods %+v, placement pods %v: want 4 flows' inputs for 2 pods", plan.Pods, plan.Placements[0].Pods)
	}
	if plan.MeterIP[v4] != v4 || plan.MeterIP[v6] != v4 || len(plan.Bandwidth) != 1 {
		t.Errorf("meter IPs %v, bandwidth %v: want one limit, named by %s, for both", plan.MeterIP, plan.Bandwidth, v4)
	}

	// An older IPv4-only Egress takes the pods' IPv4 addresses; the
	// dual-stack one keeps their IPv6 ones.
	s.Egresses[0].Created = time.Unix(100, 0)
	s.Egresses = append(s.Egresses, EgressView{Name: "old4", Created: time.Unix(1, 0), IPs: []netip.Addr{ip("198.18.0.101")}, Pods: web})
	plan = Desired(s, placement.NewRing)
	if got := plan.Held[ip("198.18.0.101")]; len(got) != 2 || !got[0].Is4() {
		t.Errorf("old4 holds %v, want both pods' IPv4 addresses", got)
	}
	if len(plan.Held[v4]) != 0 || len(plan.Held[v6]) != 2 {
		t.Errorf("dual holds %v and %v, want no IPv4 and both IPv6 addresses", plan.Held[v4], plan.Held[v6])
	}
	for _, pl := range plan.Placements {
		if len(pl.Pods) != 2 {
			t.Errorf("%s selects %v, want both pods", pl.Egress, pl.Pods)
		}
	}
}

// status.egressIPs is read one per family, IPv4 first; a status written
// before egressIPs existed still counts.
func TestEgressIPs(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   crdv1.EgressStatus
		want string
	}{
		{"dual-stack", crdv1.EgressStatus{EgressIP: "198.18.0.100", EgressIPs: []string{"198.18.0.100", "fd00::100"}}, "[198.18.0.100 fd00::100]"},
		{"IPv6 written first", crdv1.EgressStatus{EgressIPs: []string{"fd00::100", "198.18.0.100"}}, "[198.18.0.100 fd00::100]"},
		{"egressIP only", crdv1.EgressStatus{EgressIP: "198.18.0.100"}, "[198.18.0.100]"},
		{"two of one family: the first", crdv1.EgressStatus{EgressIPs: []string{"fd00::1", "fd00::2"}}, "[fd00::1]"},
		{"garbage skipped", crdv1.EgressStatus{EgressIPs: []string{"ten", "::ffff:198.18.0.1"}}, "[198.18.0.1]"},
		{"none", crdv1.EgressStatus{}, "[]"},
	} {
		if got := fmt.Sprint(egressIPs(tc.st)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
