package compute

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// recSink records events per node as short text lines.
type recSink struct {
	e      *Engine
	events map[string][]string
}

func (s *recSink) Emit(node string, ev Event) {
	s.events[node] = append(s.events[node], evText(ev))
}

func evText(ev Event) string {
	names := func(ms []Member) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Namespace+"/"+m.Name)
		}
		sort.Strings(out)
		return out
	}
	switch ev.Type {
	case PolicyUpsert:
		return "PolicyUpsert " + ev.Policy.UID
	case PolicyDelete:
		return "PolicyDelete " + ev.PolicyUID
	case AppliedToGroupDelete, AddressGroupDelete:
		return fmt.Sprintf("%s g%d", ev.Type, ev.Group)
	default:
		return fmt.Sprintf("%s g%d +%v -%v", ev.Type, ev.Group, names(ev.Added), names(ev.Removed))
	}
}

func (s *recSink) take(node string) []string {
	out := s.events[node]
	delete(s.events, node)
	return out
}

func newTestEngine() (*Engine, *recSink) {
	e := New(nil)
	s := &recSink{e: e, events: map[string][]string{}}
	e.SetSink(s)
	return e, s
}

var ipSeq = 0

func addPod(e *Engine, ns, name, node string, labels map[string]string, ports ...NamedPort) {
	ipSeq++
	e.UpsertPod(Pod{Namespace: ns, Name: name, Node: node, Labels: labels,
		IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, byte(ipSeq >> 16), byte(ipSeq >> 8), byte(ipSeq)})}, Ports: ports})
}

func sel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

// groupNames lists a group's members as namespace/name, sorted.
func groupNames(e *Engine, id GroupID) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, m := range e.members(e.groups[id], -1) {
		out = append(out, m.Namespace+"/"+m.Name)
	}
	sort.Strings(out)
	return out
}

// peerNames lists the union of a rule's address groups' members.
func peerNames(e *Engine, r Rule) []string {
	var out []string
	for _, g := range r.AddressGroups {
		out = append(out, groupNames(e, g)...)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// world: namespaces a (team=x) and b (team=y), three pods each.
func world(e *Engine) {
	e.UpsertNamespace("a", map[string]string{"team": "x"})
	e.UpsertNamespace("b", map[string]string{"team": "y"})
	for _, ns := range []string{"a", "b"} {
		addPod(e, ns, "web", "n1", map[string]string{"app": "web"}, NamedPort{"http", corev1.ProtocolTCP, 8080})
		addPod(e, ns, "db", "n2", map[string]string{"app": "db", "tier": "back"})
		addPod(e, ns, "cache", "n3", map[string]string{"app": "cache", "tier": "back"}, NamedPort{"http", corev1.ProtocolTCP, 9090})
	}
}

func ingressFrom(peers ...networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *sel("app", "web"),
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: peers}},
		},
	}
}

func TestKubernetesPeerSelectors(t *testing.T) {
	tests := []struct {
		name  string
		peers []networkingv1.NetworkPolicyPeer
		want  []string
	}{
		{"pod selector alone stays in the policy namespace",
			[]networkingv1.NetworkPolicyPeer{{PodSelector: sel("tier", "back")}}, []string{"a/cache", "a/db"}},
		{"empty pod selector is every pod of the namespace",
			[]networkingv1.NetworkPolicyPeer{{PodSelector: sel()}}, []string{"a/cache", "a/db", "a/web"}},
		{"namespace selector alone is every pod of matching namespaces",
			[]networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "y")}}, []string{"b/cache", "b/db", "b/web"}},
		{"namespace and pod selector combined",
			[]networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel(), PodSelector: sel("app", "db")}}, []string{"a/db", "b/db"}},
		{"match expressions",
			[]networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}},
				{Key: "tier", Operator: metav1.LabelSelectorOpExists},
			}}}}, []string{"a/cache", "a/db"}},
		{"does not exist",
			[]networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel(), PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}}}}, []string{"a/web", "b/web"}},
		{"two peers are a union",
			[]networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "db")}, {NamespaceSelector: sel("team", "y"), PodSelector: sel("app", "web")}},
			[]string{"a/db", "b/web"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newTestEngine()
			world(e)
			if err := e.UpsertKubernetesNetworkPolicy(ingressFrom(tc.peers...)); err != nil {
				t.Fatal(err)
			}
			p := e.ComputedPolicy("k8s:a/p")
			if p == nil {
				t.Fatal("policy not computed")
			}
			if diff := cmp.Diff([]string{"a/web"}, groupNames(e, p.AppliedToGroups[0])); diff != "" {
				t.Errorf("appliedTo (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, peerNames(e, p.Rules[0])); diff != "" {
				t.Errorf("peers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPolicyTypesDefaulting(t *testing.T) {
	eg := []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: sel()}}}}
	in := []networkingv1.NetworkPolicyIngressRule{{}}
	tests := []struct {
		name         string
		types        []networkingv1.PolicyType
		ingress      []networkingv1.NetworkPolicyIngressRule
		egress       []networkingv1.NetworkPolicyEgressRule
		isoIn, isoEg bool
		rules        []string
	}{
		{"no types no rules isolates ingress only", nil, nil, nil, true, false, nil},
		{"egress rules add egress", nil, in, eg, true, true, []string{"Ingress any", "Egress peers"}},
		{"explicit egress ignores ingress rules", []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, in, nil, false, true, nil},
		{"both types default deny", []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, nil, nil, true, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newTestEngine()
			world(e)
			np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"},
				Spec: networkingv1.NetworkPolicySpec{PolicyTypes: tc.types, Ingress: tc.ingress, Egress: tc.egress}}
			if err := e.UpsertKubernetesNetworkPolicy(np); err != nil {
				t.Fatal(err)
			}
			p := e.ComputedPolicy("k8s:a/p")
			var rules []string
			for _, r := range p.Rules {
				kind := "peers"
				if r.AnyPeer {
					kind = "any"
				}
				rules = append(rules, r.Direction.String()+" "+kind)
			}
			got := []any{p.IsolateIngress, p.IsolateEgress, rules}
			if diff := cmp.Diff([]any{tc.isoIn, tc.isoEg, tc.rules}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPorts(t *testing.T) {
	tcp, udp, sctp := corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP
	i32 := func(v int32) *int32 { return &v }
	num := intstr.FromInt32(80)
	name := intstr.FromString("http")
	tests := []struct {
		name    string
		ports   []networkingv1.NetworkPolicyPort
		want    []Port
		wantErr error
	}{
		{"default protocol is TCP", []networkingv1.NetworkPolicyPort{{Port: &num}}, []Port{{Protocol: tcp, Port: 80}}, nil},
		{"protocol only is every port", []networkingv1.NetworkPolicyPort{{Protocol: &udp}}, []Port{{Protocol: udp}}, nil},
		{"range", []networkingv1.NetworkPolicyPort{{Protocol: &sctp, Port: &num, EndPort: i32(90)}}, []Port{{Protocol: sctp, Port: 80, EndPort: 90}}, nil},
		{"named", []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &name}}, []Port{{Protocol: tcp, Name: "http"}}, nil},
		{"endPort below port", []networkingv1.NetworkPolicyPort{{Port: &num, EndPort: i32(70)}}, nil, ErrInvalid},
		{"endPort with named port", []networkingv1.NetworkPolicyPort{{Port: &name, EndPort: i32(90)}}, nil, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newTestEngine()
			world(e)
			np := ingressFrom()
			np.Spec.Ingress[0].Ports = tc.ports
			err := e.UpsertKubernetesNetworkPolicy(np)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				// Fail closed: isolated, nothing allowed.
				if p := e.ComputedPolicy("k8s:a/p"); p == nil || !p.IsolateIngress || len(p.Rules) != 0 {
					t.Fatalf("invalid policy computed as %+v, want isolation with no rule", p)
				}
				return
			}
			if diff := cmp.Diff(tc.want, e.ComputedPolicy("k8s:a/p").Rules[0].Ports); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNamedPortResolvesPerPod(t *testing.T) {
	e, _ := newTestEngine()
	world(e)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel(),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromString("http"))}}}}}}
	if err := e.UpsertKubernetesNetworkPolicy(np); err != nil {
		t.Fatal(err)
	}
	p := e.ComputedPolicy("k8s:a/p")
	got := map[string]string{}
	for _, node := range []string{"n1", "n2", "n3"} {
		for _, g := range e.Snapshot(node).AppliedToGroups {
			for _, m := range g.Members {
				s, end, ok := ResolvePort(p.Rules[0].Ports[0], m.Ports)
				got[m.Name] = fmt.Sprint(s, end, ok)
			}
		}
	}
	want := map[string]string{"web": "8080 8080 true", "cache": "9090 9090 true", "db": "0 0 false"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func ptr[T any](v T) *T { return &v }

func TestIPBlocks(t *testing.T) {
	tests := []struct {
		name    string
		cidr    string
		except  []string
		want    IPBlock
		wantErr error
	}{
		{"cidr with except", "10.0.0.0/8", []string{"10.1.0.0/16"}, IPBlock{CIDR: netip.MustParsePrefix("10.0.0.0/8"), Except: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}, nil},
		{"host bits are masked", "192.168.1.7/24", nil, IPBlock{CIDR: netip.MustParsePrefix("192.168.1.0/24")}, nil},
		{"ipv6", "2001:db8::/32", nil, IPBlock{CIDR: netip.MustParsePrefix("2001:db8::/32")}, nil},
		{"bad cidr", "10.0.0.0/33", nil, IPBlock{}, ErrInvalidCIDR},
		{"except outside", "10.0.0.0/16", []string{"11.0.0.0/24"}, IPBlock{}, ErrInvalidCIDR},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newTestEngine()
			world(e)
			err := e.UpsertKubernetesNetworkPolicy(ingressFrom(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: tc.cidr, Except: tc.except}}))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff([]IPBlock{tc.want}, e.ComputedPolicy("k8s:a/p").Rules[0].IPBlocks, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGroupSharing(t *testing.T) {
	e, _ := newTestEngine()
	world(e)
	p1 := ingressFrom(networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "db")})
	p2 := ingressFrom(networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"db"}}}}})
	p2.Name = "p2"
	p2.Spec.PodSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}}
	for _, p := range []*networkingv1.NetworkPolicy{p1, p2} {
		if err := e.UpsertKubernetesNetworkPolicy(p); err != nil {
			t.Fatal(err)
		}
	}
	a, b := e.ComputedPolicy("k8s:a/p"), e.ComputedPolicy("k8s:a/p2")
	if a.AppliedToGroups[0] != b.AppliedToGroups[0] || a.Rules[0].AddressGroups[0] != b.Rules[0].AddressGroups[0] {
		t.Errorf("equal selectors written differently did not share groups: %v %v", a, b)
	}
	if got := e.Stats().Groups; got != 2 {
		t.Errorf("groups = %d, want 2", got)
	}
	e.DeleteKubernetesNetworkPolicy("a", "p")
	if got := e.Stats().Groups; got != 2 {
		t.Errorf("after deleting one user: groups = %d, want 2", got)
	}
	e.DeleteKubernetesNetworkPolicy("a", "p2")
	if got := e.Stats(); got.Groups != 0 || got.Policies != 0 {
		t.Errorf("after deleting both: %+v, want no groups or policies", got)
	}
}

func TestSpanAndEvents(t *testing.T) {
	e, s := newTestEngine()
	world(e)
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		e.Watch(n, func(NodeSnapshot) {})
	}
	// web (n1) accepts from tier=back pods (db on n2, cache on n3).
	if err := e.UpsertKubernetesNetworkPolicy(ingressFrom(networkingv1.NetworkPolicyPeer{PodSelector: sel("tier", "back")})); err != nil {
		t.Fatal(err)
	}
	p := e.ComputedPolicy("k8s:a/p")
	atg, ag := p.AppliedToGroups[0], p.Rules[0].AddressGroups[0]
	steps := []struct {
		name string
		do   func()
		want map[string][]string
	}{
		{"policy created: only the node of the applied-to pod hears of it", func() {}, map[string][]string{
			"n1": {fmt.Sprintf("AppliedToGroupUpsert g%d +[a/web] -[]", atg), fmt.Sprintf("AddressGroupUpsert g%d +[a/cache a/db] -[]", ag), "PolicyUpsert k8s:a/p"},
		}},
		{"peer label change patches the address group on span nodes only", func() {
			addPod(e, "a", "db", "n2", map[string]string{"app": "db"})
		}, map[string][]string{"n1": {fmt.Sprintf("AddressGroupPatch g%d +[] -[a/db]", ag)}}},
		{"label change elsewhere yields nothing", func() {
			addPod(e, "b", "db", "n2", map[string]string{"app": "db"})
		}, map[string][]string{}},
		{"second applied-to pod on a new node extends the span", func() {
			addPod(e, "a", "web2", "n4", map[string]string{"app": "web"})
		}, map[string][]string{"n4": {fmt.Sprintf("AppliedToGroupUpsert g%d +[a/web2] -[]", atg), fmt.Sprintf("AddressGroupUpsert g%d +[a/cache] -[]", ag), "PolicyUpsert k8s:a/p"}}},
		{"pod moving to another node shrinks the span", func() {
			e.DeletePod("a", "web2")
			addPod(e, "a", "web2", "n1", map[string]string{"app": "web"})
		}, map[string][]string{
			"n4": {"PolicyDelete k8s:a/p", fmt.Sprintf("AddressGroupDelete g%d", ag), fmt.Sprintf("AppliedToGroupDelete g%d", atg)},
			"n1": {fmt.Sprintf("AppliedToGroupPatch g%d +[a/web2] -[]", atg)},
		}},
		{"policy deleted", func() { e.DeleteKubernetesNetworkPolicy("a", "p") }, map[string][]string{
			"n1": {"PolicyDelete k8s:a/p", fmt.Sprintf("AddressGroupDelete g%d", ag), fmt.Sprintf("AppliedToGroupDelete g%d", atg)},
		}},
	}
	for _, st := range steps {
		st.do()
		got := map[string][]string{}
		for _, n := range []string{"n1", "n2", "n3", "n4"} {
			if ev := s.take(n); len(ev) > 0 {
				got[n] = ev
			}
		}
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", st.name, diff)
		}
	}
}

func TestSnapshotMatchesEvents(t *testing.T) {
	// Whatever order inputs arrive in, a node's snapshot equals the state
	// its events build.
	e, _ := newTestEngine()
	pols := []*networkingv1.NetworkPolicy{
		ingressFrom(networkingv1.NetworkPolicyPeer{PodSelector: sel("tier", "back")}),
		ingressFrom(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "y"), PodSelector: sel("app", "web")}),
	}
	pols[1].Name = "q"
	for _, p := range pols {
		if err := e.UpsertKubernetesNetworkPolicy(p); err != nil {
			t.Fatal(err)
		}
	}
	world(e) // pods after policies
	late, _ := newTestEngine()
	world(late)
	for _, p := range pols {
		if err := late.UpsertKubernetesNetworkPolicy(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		a, b := e.Snapshot(n), late.Snapshot(n)
		if diff := cmp.Diff(a, b, cmp.Comparer(func(x, y netip.Addr) bool { return true })); diff != "" {
			t.Errorf("node %s: pods-first and policies-first differ (-a +b):\n%s", n, diff)
		}
	}
}

func TestLabelChangeUsesIndex(t *testing.T) {
	e, _ := newTestEngine()
	for i := range 500 {
		ns := fmt.Sprintf("ns%d", i)
		e.UpsertNamespace(ns, map[string]string{"team": "x"})
		addPod(e, ns, "p", "n1", map[string]string{"app": "a"})
		np := ingressFrom(networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "a")})
		np.Namespace = ns
		np.Spec.PodSelector = *sel("app", "a")
		if err := e.UpsertKubernetesNetworkPolicy(np); err != nil {
			t.Fatal(err)
		}
	}
	e.evals = 0
	addPod(e, "ns7", "p", "n1", map[string]string{"app": "b"})
	if e.evals > 4 {
		t.Errorf("a label change evaluated %d selectors; want only those of its namespace (<= 4)", e.evals)
	}
	e.evals = 0
	e.UpsertNamespace("ns9", map[string]string{"team": "y"})
	if e.evals != 0 {
		t.Errorf("a namespace label change with no namespace selectors in use evaluated %d selectors", e.evals)
	}
}

// scanSnapshot is the obvious O(world) definition of a node's snapshot, to
// check the indexed one against.
func scanSnapshot(e *Engine, node string) NodeSnapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.nodeIdx(node)
	var s NodeSnapshot
	for _, g := range e.groups {
		if g == nil {
			continue
		}
		if g.atgRefs > 0 && hasNode(g.nodes, n) {
			s.AppliedToGroups = append(s.AppliedToGroups, GroupState{ID: g.id, Members: e.members(g, n)})
		}
		if hasNode(g.agSpan, n) {
			s.AddressGroups = append(s.AddressGroups, GroupState{ID: g.id, Members: e.members(g, -1)})
		}
	}
	for _, id := range e.policyByUID {
		if rec := e.policies[id]; rec.out != nil && e.anyOnNode(rec.atgs, n) {
			s.Policies = append(s.Policies, rec.out)
		}
	}
	sort.Slice(s.Policies, func(i, j int) bool { return s.Policies[i].UID < s.Policies[j].UID })
	return s
}

func TestIndexedSnapshotEqualsScan(t *testing.T) {
	e, _ := newTestEngine()
	world(e)
	for i, peer := range []networkingv1.NetworkPolicyPeer{{PodSelector: sel("tier", "back")}, {NamespaceSelector: sel("team", "y")}, {PodSelector: sel("app", "web")}} {
		np := ingressFrom(peer)
		np.Name = fmt.Sprint("p", i)
		if i == 2 {
			np.Spec.PodSelector = *sel("tier", "back")
		}
		if err := e.UpsertKubernetesNetworkPolicy(np); err != nil {
			t.Fatal(err)
		}
	}
	e.DeletePod("a", "cache")
	addPod(e, "b", "web", "n2", map[string]string{"app": "web"})
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		if diff := cmp.Diff(scanSnapshot(e, n), e.Snapshot(n), cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
			t.Errorf("node %s (-scan +indexed):\n%s", n, diff)
		}
	}
}

// An invalid rule must never open what the policy isolates: the policy
// stays, isolating its pods with no rule allowing anything, and the
// error is returned for the reconciler to report.
func TestInvalidKubernetesPolicyFailsClosed(t *testing.T) {
	e, _ := newTestEngine()
	world(e)
	// First a valid version that allows from web pods.
	if err := e.UpsertKubernetesNetworkPolicy(ingressFrom(networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "db")})); err != nil {
		t.Fatal(err)
	}
	bad := ingressFrom(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}})
	err := e.UpsertKubernetesNetworkPolicy(bad)
	if !errors.Is(err, ErrInvalidCIDR) {
		t.Fatalf("err = %v, want ErrInvalidCIDR", err)
	}
	p := e.ComputedPolicy("k8s:a/p")
	if p == nil {
		t.Fatal("the invalid policy was dropped: the pods it isolates would be open")
	}
	if !p.IsolateIngress || len(p.Rules) != 0 {
		t.Fatalf("invalid policy computed as isolateIngress=%v with %d rules; want isolation and no rule", p.IsolateIngress, len(p.Rules))
	}
	if got := groupNames(e, p.AppliedToGroups[0]); !slices.Equal(got, []string{"a/web"}) {
		t.Fatalf("isolated pods %v, want [a/web]", got)
	}
	info, ok := e.Policy("k8s:a/p")
	if !ok || info.Err == nil {
		t.Fatalf("the error is not recorded for status: %+v", info)
	}
}
