package compute

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeModel is what a node builds by applying its events in order.
type nodeModel struct {
	policies map[string]*Policy
	atgs     map[GroupID]map[string]bool
	ags      map[GroupID]map[string]bool
}

func newNodeModel() *nodeModel {
	return &nodeModel{policies: map[string]*Policy{}, atgs: map[GroupID]map[string]bool{}, ags: map[GroupID]map[string]bool{}}
}

func memberKey(m Member) string { return fmt.Sprintf("%s/%s@%s%v", m.Namespace, m.Name, m.Node, m.IPs) }

func (nm *nodeModel) apply(t *testing.T, node string, ev Event) {
	set := func(ms []Member) map[string]bool {
		s := map[string]bool{}
		for _, m := range ms {
			s[memberKey(m)] = true
		}
		return s
	}
	patch := func(s map[string]bool, kind string) {
		if s == nil {
			t.Fatalf("node %s: %s patch for group %d it does not hold", node, kind, ev.Group)
		}
		for _, m := range ev.Removed {
			if !s[memberKey(m)] {
				t.Fatalf("node %s: %s patch removes %s which group %d lacks", node, kind, memberKey(m), ev.Group)
			}
			delete(s, memberKey(m))
		}
		for _, m := range ev.Added {
			s[memberKey(m)] = true
		}
	}
	switch ev.Type {
	case PolicyUpsert:
		nm.policies[ev.Policy.UID] = ev.Policy
	case PolicyDelete:
		if nm.policies[ev.PolicyUID] == nil {
			t.Fatalf("node %s: delete of policy %s it does not hold", node, ev.PolicyUID)
		}
		delete(nm.policies, ev.PolicyUID)
	case AppliedToGroupUpsert:
		nm.atgs[ev.Group] = set(ev.Added)
	case AppliedToGroupPatch:
		patch(nm.atgs[ev.Group], "ATG")
	case AppliedToGroupDelete:
		delete(nm.atgs, ev.Group)
	case AddressGroupUpsert:
		nm.ags[ev.Group] = set(ev.Added)
	case AddressGroupPatch:
		patch(nm.ags[ev.Group], "AG")
	case AddressGroupDelete:
		delete(nm.ags, ev.Group)
	}
}

func fromSnapshot(s NodeSnapshot) *nodeModel {
	nm := newNodeModel()
	for _, p := range s.Policies {
		nm.policies[p.UID] = p
	}
	for _, g := range s.AppliedToGroups {
		nm.atgs[g.ID] = map[string]bool{}
		for _, m := range g.Members {
			nm.atgs[g.ID][memberKey(m)] = true
		}
	}
	for _, g := range s.AddressGroups {
		nm.ags[g.ID] = map[string]bool{}
		for _, m := range g.Members {
			nm.ags[g.ID][memberKey(m)] = true
		}
	}
	return nm
}

// resolved renders the model with group IDs replaced by members, so two
// engines that numbered their groups differently compare equal. Every group
// a policy names must be held (ATGs may be absent: no pods on the node).
func (nm *nodeModel) resolved(t *testing.T, node string) map[string][]string {
	out := map[string][]string{}
	names := func(groups map[GroupID]map[string]bool, ids []GroupID, mustHold bool, what string) string {
		var ms []string
		for _, id := range ids {
			g, ok := groups[id]
			if !ok && mustHold {
				t.Fatalf("node %s: %s names group %d it does not hold", node, what, id)
			}
			for m := range g {
				ms = append(ms, m)
			}
		}
		sort.Strings(ms)
		return strings.Join(ms, " ")
	}
	for uid, p := range nm.policies {
		lines := []string{fmt.Sprintf("iso=%v/%v at={%s}", p.IsolateIngress, p.IsolateEgress, names(nm.atgs, p.AppliedToGroups, false, uid))}
		for _, r := range p.Rules {
			lines = append(lines, fmt.Sprintf("%s any=%v at={%s} peers={%s}", r.Direction, r.AnyPeer,
				names(nm.atgs, r.AppliedToGroups, false, uid), names(nm.ags, r.AddressGroups, true, uid)))
		}
		out[uid] = lines
	}
	return out
}

type modelSink struct {
	t     *testing.T
	nodes map[string]*nodeModel
}

func (s *modelSink) Emit(node string, ev Event) { s.nodes[node].apply(s.t, node, ev) }

// TestRandomOperationsMatchRecompute applies random pod, namespace and
// policy changes. After each, every node's event-built state must equal its
// snapshot, and the snapshot must equal what a fresh engine computes from
// the same inputs: incremental maintenance never drifts from the definition.
func TestRandomOperationsMatchRecompute(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4"}
	nss := []string{"a", "b", "c"}
	labelSets := []map[string]string{nil, {"app": "x"}, {"app": "y"}, {"app": "x", "tier": "t"}, {"tier": "t"}}
	nsLabelSets := []map[string]string{nil, {"env": "prod"}, {"env": "dev"}, {"env": "prod", "team": "k"}}
	sels := []*metav1.LabelSelector{sel(), sel("app", "x"), sel("app", "y"), sel("tier", "t"),
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}}}
	peer := func(r *rand.Rand) networkingv1.NetworkPolicyPeer {
		switch r.IntN(3) {
		case 0:
			return networkingv1.NetworkPolicyPeer{PodSelector: sels[r.IntN(len(sels))]}
		case 1:
			return networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("env", "prod")}
		default:
			return networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("env", "prod"), PodSelector: sels[r.IntN(len(sels))]}
		}
	}
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 99))
		e := New(nil)
		sink := &modelSink{t: t, nodes: map[string]*nodeModel{}}
		e.SetSink(sink)
		for _, n := range nodes {
			sink.nodes[n] = newNodeModel()
			e.Watch(n, func(NodeSnapshot) {})
		}
		pods := map[string]Pod{}
		nsLabels := map[string]map[string]string{}
		pols := map[string]*networkingv1.NetworkPolicy{}
		for step := range 150 {
			var op string
			switch k := r.IntN(10); {
			case k < 4:
				ns, name := nss[r.IntN(len(nss))], fmt.Sprint("p", r.IntN(6))
				p := Pod{Namespace: ns, Name: name, Node: nodes[r.IntN(len(nodes))], Labels: labelSets[r.IntN(len(labelSets))],
					IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, byte(r.IntN(3)), 0, byte(r.IntN(250))})}}
				pods[ns+"/"+name] = p
				e.UpsertPod(p)
				op = fmt.Sprintf("upsert pod %s/%s %v on %s", ns, name, p.Labels, p.Node)
			case k < 5:
				ns, name := nss[r.IntN(len(nss))], fmt.Sprint("p", r.IntN(6))
				delete(pods, ns+"/"+name)
				e.DeletePod(ns, name)
				op = "delete pod " + ns + "/" + name
			case k < 7:
				ns := nss[r.IntN(len(nss))]
				nsLabels[ns] = nsLabelSets[r.IntN(len(nsLabelSets))]
				e.UpsertNamespace(ns, nsLabels[ns])
				op = fmt.Sprintf("namespace %s labels %v", ns, nsLabels[ns])
			case k < 9:
				np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: nss[r.IntN(len(nss))], Name: fmt.Sprint("np", r.IntN(4))},
					Spec: networkingv1.NetworkPolicySpec{PodSelector: *sels[r.IntN(len(sels))]}}
				for range r.IntN(3) {
					np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{peer(r)}})
				}
				if r.IntN(2) == 0 {
					np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{peer(r), peer(r)}}}
				}
				pols[np.Namespace+"/"+np.Name] = np
				if err := e.UpsertKubernetesNetworkPolicy(np); err != nil {
					t.Fatal(err)
				}
				op = "upsert policy " + np.Namespace + "/" + np.Name
			default:
				ns, name := nss[r.IntN(len(nss))], fmt.Sprint("np", r.IntN(4))
				delete(pols, ns+"/"+name)
				e.DeleteKubernetesNetworkPolicy(ns, name)
				op = "delete policy " + ns + "/" + name
			}
			fresh := New(nil)
			for ns, l := range nsLabels {
				fresh.UpsertNamespace(ns, l)
			}
			for _, np := range pols {
				_ = fresh.UpsertKubernetesNetworkPolicy(np)
			}
			for _, p := range pods {
				fresh.UpsertPod(p)
			}
			for _, n := range nodes {
				fromEvents := sink.nodes[n].resolved(t, n)
				snap := fromSnapshot(e.Snapshot(n)).resolved(t, n)
				if diff := cmp.Diff(snap, fromEvents); diff != "" {
					t.Fatalf("seed %d step %d (%s): node %s events differ from snapshot (-snapshot +events):\n%s", seed, step, op, n, diff)
				}
				want := fromSnapshot(fresh.Snapshot(n)).resolved(t, n)
				if diff := cmp.Diff(want, snap); diff != "" {
					t.Fatalf("seed %d step %d (%s): node %s incremental differs from recompute (-recompute +incremental):\n%s", seed, step, op, n, diff)
				}
			}
		}
	}
}
