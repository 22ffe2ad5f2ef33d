package compute

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
)

func builtinTiers(e *Engine) {
	for _, t := range BuiltinTiers {
		e.UpsertTier(t.Name, t.Priority)
	}
}

func cnp(name, tier string, prio int32, rules ...crdv1.Rule) *crdv1.ClusterNetworkPolicy {
	return &crdv1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: crdv1.PolicySpec{Tier: tier, Priority: prio, AppliedTo: []crdv1.AppliedTo{{PodSelector: sel("app", "web")}}, Ingress: rules}}
}

func TestNativeTiersAndPriorities(t *testing.T) {
	e, _ := newTestEngine()
	world(e)
	builtinTiers(e)
	drop := crdv1.Rule{Name: "deny", Action: crdv1.RuleActionDrop, From: []crdv1.Peer{{NamespaceSelector: sel("team", "y")}}}
	pass := crdv1.Rule{Name: "pass", Action: crdv1.RuleActionPass}
	tests := []struct {
		name     string
		pol      *crdv1.ClusterNetworkPolicy
		wantErr  error
		tierPrio int32
		actions  []Action
	}{
		{"default tier is application", cnp("c1", "", 5, drop), nil, 250, []Action{Drop}},
		{"emergency tier, two rules in order", cnp("c2", "emergency", 1, pass, drop), nil, 50, []Action{Pass, Drop}},
		{"unknown tier", cnp("c3", "nope", 1, drop), ErrUnknownTier, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := e.UpsertClusterNetworkPolicy(tc.pol)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			p := e.ComputedPolicy(NativeUID(NativeClusterNetworkPolicy, "", tc.pol.Name))
			if err != nil {
				if p != nil {
					t.Fatal("invalid policy computed")
				}
				info, _ := e.Policy(NativeUID(NativeClusterNetworkPolicy, "", tc.pol.Name))
				if !errors.Is(info.Err, tc.wantErr) {
					t.Errorf("recorded err = %v", info.Err)
				}
				return
			}
			var actions []Action
			for i, r := range p.Rules {
				actions = append(actions, r.Action)
				if r.Priority != int32(i) {
					t.Errorf("rule %d priority %d", i, r.Priority)
				}
			}
			if diff := cmp.Diff([]any{tc.tierPrio, tc.pol.Spec.Priority, tc.actions}, []any{p.TierPriority, p.Priority, actions}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// The unknown tier appears: the waiting policy is computed; a priority
	// change recomputes its users; deleting it invalidates them again.
	e.UpsertTier("nope", 7)
	if p := e.ComputedPolicy("cnp:c3"); p == nil || p.TierPriority != 7 {
		t.Fatalf("after creating the tier: %+v", p)
	}
	e.UpsertTier("nope", 9)
	if p := e.ComputedPolicy("cnp:c3"); p.TierPriority != 9 {
		t.Fatalf("after tier priority change: %d", p.TierPriority)
	}
	e.DeleteTier("nope")
	if info, _ := e.Policy("cnp:c3"); !errors.Is(info.Err, ErrUnknownTier) || e.ComputedPolicy("cnp:c3") != nil {
		t.Fatalf("after deleting the tier: %+v", info)
	}
	if e.ComputedPolicy("cnp:c1") == nil {
		t.Fatal("an invalid policy broke another one")
	}
}

func TestNativeSelectorsAndGroups(t *testing.T) {
	e, _ := newTestEngine()
	world(e)
	builtinTiers(e)
	e.UpsertClusterGroup("backends", crdv1.GroupSpec{PodSelector: sel("tier", "back"), ChildGroups: []string{"ext"}})
	e.UpsertClusterGroup("ext", crdv1.GroupSpec{IPBlocks: []crdv1.IPBlock{{CIDR: "192.0.2.0/24"}}})
	e.UpsertGroup("b", "dbs", crdv1.GroupSpec{PodSelector: sel("app", "db")})
	tests := []struct {
		name      string
		upsert    func() error
		uid       string
		wantErr   error
		appliedTo []string
		peers     []string
		blocks    int
	}{
		{"cluster policy pod selector spans namespaces, group peer with child ipBlock",
			func() error {
				return e.UpsertClusterNetworkPolicy(cnp("g1", "", 1, crdv1.Rule{Action: crdv1.RuleActionAllow, From: []crdv1.Peer{{Group: "backends"}}}))
			}, "cnp:g1", nil, []string{"a/web", "b/web"}, []string{"a/cache", "a/db", "b/cache", "b/db"}, 1},
		{"namespaced policy: group in its namespace, rule-level appliedTo",
			func() error {
				return e.UpsertNativeNetworkPolicy(&crdv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "n1"},
					Spec: crdv1.PolicySpec{Priority: 1, Egress: []crdv1.Rule{{Action: crdv1.RuleActionReject, To: []crdv1.Peer{{Group: "dbs"}},
						AppliedTo: []crdv1.AppliedTo{{PodSelector: sel("app", "web")}}}}}})
			}, "snp:b/n1", nil, []string{"b/web"}, []string{"b/db"}, 0},
		{"unknown group", func() error {
			return e.UpsertClusterNetworkPolicy(cnp("g2", "", 1, crdv1.Rule{Action: crdv1.RuleActionAllow, From: []crdv1.Peer{{Group: "missing"}}}))
		}, "cnp:g2", ErrUnknownGroup, nil, nil, 0},
		{"bad cidr", func() error {
			return e.UpsertClusterNetworkPolicy(cnp("g3", "", 1, crdv1.Rule{Action: crdv1.RuleActionAllow, From: []crdv1.Peer{{IPBlock: &crdv1.IPBlock{CIDR: "300.0.0.0/8"}}}}))
		}, "cnp:g3", ErrInvalidCIDR, nil, nil, 0},
		{"group in another namespace is unknown", func() error {
			return e.UpsertNativeNetworkPolicy(&crdv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "n2"},
				Spec: crdv1.PolicySpec{Priority: 1, AppliedTo: []crdv1.AppliedTo{{Group: "dbs"}}}})
		}, "snp:a/n2", ErrUnknownGroup, nil, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.upsert()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			p := e.ComputedPolicy(tc.uid)
			var at []string
			for _, g := range p.Rules[0].AppliedToGroups {
				at = append(at, groupNames(e, g)...)
			}
			got := []any{at, peerNames(e, p.Rules[0]), len(p.Rules[0].IPBlocks)}
			if diff := cmp.Diff([]any{tc.appliedTo, tc.peers, tc.blocks}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// Creating the missing group computes its waiting user; changing a child
	// group recomputes the parent's users.
	e.UpsertClusterGroup("missing", crdv1.GroupSpec{NamespaceSelector: sel("team", "x")})
	if p := e.ComputedPolicy("cnp:g2"); p == nil || len(peerNames(e, p.Rules[0])) != 3 {
		t.Fatalf("after creating the group: %+v", p)
	}
	e.UpsertClusterGroup("ext", crdv1.GroupSpec{IPBlocks: []crdv1.IPBlock{{CIDR: "192.0.2.0/24"}, {CIDR: "198.51.100.0/24"}}})
	if p := e.ComputedPolicy("cnp:g1"); len(p.Rules[0].IPBlocks) != 2 {
		t.Fatalf("child group change not applied: %+v", p.Rules[0].IPBlocks)
	}
	if got := e.DrainDirty(); !cmp.Equal(got, []string{"cnp:g1", "cnp:g2", "cnp:g3", "snp:a/n2", "snp:b/n1"}) {
		t.Errorf("dirty = %v", got)
	}
}

func TestRuleLevelAppliedToSpan(t *testing.T) {
	e, s := newTestEngine()
	world(e) // web on n1, db on n2, cache on n3 in namespaces a and b
	builtinTiers(e)
	for _, n := range []string{"n1", "n2", "n3"} {
		e.Watch(n, func(NodeSnapshot) {})
	}
	err := e.UpsertClusterNetworkPolicy(&crdv1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "split"},
		Spec: crdv1.PolicySpec{Priority: 1, Ingress: []crdv1.Rule{
			{Name: "to-web", Action: crdv1.RuleActionAllow, From: []crdv1.Peer{{PodSelector: sel("app", "db")}}, AppliedTo: []crdv1.AppliedTo{{PodSelector: sel("app", "web")}}},
			{Name: "to-db", Action: crdv1.RuleActionDrop, From: []crdv1.Peer{{PodSelector: sel("app", "cache")}}, AppliedTo: []crdv1.AppliedTo{{PodSelector: sel("app", "db")}}},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	p := e.ComputedPolicy("cnp:split")
	web, db := p.Rules[0].AppliedToGroups[0], p.Rules[1].AppliedToGroups[0]
	// The policy's ATGs are the union of its rules'.
	if diff := cmp.Diff([]GroupID(nil), p.AppliedToGroups); diff != "" {
		t.Errorf("policy-level ATGs: %s", diff)
	}
	got := map[string][]string{"n1": s.take("n1"), "n2": s.take("n2"), "n3": s.take("n3")}
	want := map[string][]string{
		// n1 runs the web pods: only the db peers of rule to-web.
		"n1": {fmt.Sprintf("AppliedToGroupUpsert g%d +[a/web b/web] -[]", web), fmt.Sprintf("AddressGroupUpsert g%d +[a/db b/db] -[]", db), "PolicyUpsert cnp:split"},
		// n2 runs the db pods: the db group is its ATG; its peers are the caches.
		"n2": {fmt.Sprintf("AppliedToGroupUpsert g%d +[a/db b/db] -[]", db), fmt.Sprintf("AddressGroupUpsert g%d +[a/cache b/cache] -[]", p.Rules[1].AddressGroups[0]), "PolicyUpsert cnp:split"},
		"n3": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if info, _ := e.Policy("cnp:split"); !cmp.Equal(info.Nodes, []string{"n1", "n2"}) {
		t.Errorf("span %v, want n1 n2", info.Nodes)
	}
}

func TestGroupValidity(t *testing.T) {
	e, _ := newTestEngine()
	e.UpsertClusterGroup("parent", crdv1.GroupSpec{ChildGroups: []string{"child"}})
	e.UpsertGroup("a", "blocks", crdv1.GroupSpec{IPBlocks: []crdv1.IPBlock{{CIDR: "10.0.0.0/99"}}})
	tests := []struct {
		ref     GroupRef
		exists  bool
		wantErr error
	}{
		{GroupRef{"", "parent"}, true, ErrUnknownGroup},
		{GroupRef{"a", "blocks"}, true, ErrInvalidCIDR},
		{GroupRef{"", "none"}, false, nil},
	}
	for _, tc := range tests {
		exists, err := e.GroupError(tc.ref)
		if exists != tc.exists || !errors.Is(err, tc.wantErr) {
			t.Errorf("%v: exists %v err %v; want %v %v", tc.ref, exists, err, tc.exists, tc.wantErr)
		}
	}
	e.DrainDirtyGroups()
	// The child appearing fixes the parent, which is marked for a status update.
	e.UpsertClusterGroup("child", crdv1.GroupSpec{PodSelector: sel("app", "x")})
	if _, err := e.GroupError(GroupRef{"", "parent"}); err != nil {
		t.Errorf("parent after child appeared: %v", err)
	}
	got := e.DrainDirtyGroups()
	slices.SortFunc(got, func(a, b GroupRef) int { return strings.Compare(a.Name, b.Name) })
	if diff := cmp.Diff([]GroupRef{{"", "child"}, {"", "parent"}}, got); diff != "" {
		t.Errorf("dirty groups (-want +got):\n%s", diff)
	}
	e.UpsertClusterGroup("child", crdv1.GroupSpec{ChildGroups: []string{"x"}})
	if _, err := e.GroupError(GroupRef{"", "parent"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("nested children: %v, want ErrInvalid", err)
	}
}
