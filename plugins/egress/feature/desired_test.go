package feature

import (
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

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
	s.Egresses = []EgressView{{Name: "e", IP: ip("198.18.0.100"), Pool: "p", Pods: web}}
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
	s.Egresses = append(s.Egresses, EgressView{Name: "old", Created: time.Unix(1, 0).Add(-time.Hour), IP: ip("198.18.0.101"), Pool: "p", Pods: web})
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
