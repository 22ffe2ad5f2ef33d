package flows

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
	"switchyard.dev/switchyard/controller/client"
	"switchyard.dev/switchyard/sdk/flow"
)

func ip(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

func member(ns, name, addr string, ports ...*apiv1.NamedPort) *apiv1.Member {
	return &apiv1.Member{Namespace: ns, Name: name, Node: "node-1", Ips: [][]byte{ip(addr)}, Ports: ports}
}

func group(id uint32, ms ...*apiv1.Member) *client.Group {
	g := &client.Group{ID: id, Members: map[client.MemberKey]*apiv1.Member{}}
	for _, m := range ms {
		g.Members[client.KeyOf(m)] = m
	}
	return g
}

var node = Node{Trusted: []netip.Addr{netip.MustParseAddr("10.244.1.1")}, CTZone: 7}

// state builds a span from policies and groups.
func state(ps []*apiv1.Policy, atgs, ags []*client.Group) *client.State {
	s := client.NewState()
	for _, p := range ps {
		s.Policies[p.Uid] = p
	}
	for _, g := range atgs {
		s.AppliedToGroups[g.ID] = g
	}
	for _, g := range ags {
		s.AddressGroups[g.ID] = g
	}
	return s
}

func strs(fs []flow.Flow) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

// spanFlows are the flows of a result without the static ones.
func spanFlows(r Result) []string {
	static := map[string]bool{}
	for _, s := range strs(Compute(client.NewState(), node).Flows) {
		static[s] = true
	}
	var out []string
	for _, s := range strs(r.Flows) {
		if !static[s] {
			out = append(out, s)
		}
	}
	return out
}

func validate(t *testing.T, r Result) {
	t.Helper()
	keys := map[flow.Key]bool{}
	for _, f := range r.Flows {
		if err := f.Validate(); err != nil {
			t.Errorf("invalid flow %s: %v", f.String(), err)
		}
		if keys[f.Key()] {
			t.Errorf("two flows share key %s", f.Key())
		}
		keys[f.Key()] = true
	}
}

func k8s(uid string, in, eg bool, atg []uint32, rules ...*apiv1.Rule) *apiv1.Policy {
	return &apiv1.Policy{Uid: uid, SourceKind: SourceKubernetes, Namespace: "x", Name: uid, TierPriority: 251,
		IsolateIngress: in, IsolateEgress: eg, AppliedToGroups: atg, Rules: rules}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the computed flows")

// golden compares lines with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name string, got []string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	text := strings.Join(got, "\n") + "\n"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(strings.Split(strings.TrimSuffix(string(want), "\n"), "\n"), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func TestStaticFlows(t *testing.T) {
	r := Compute(client.NewState(), node)
	validate(t, r)
	golden(t, "static", strs(r.Flows))
}

func TestPortRange(t *testing.T) {
	for _, tc := range []struct {
		start, end uint16
		want       [][2]uint16
	}{
		{80, 80, [][2]uint16{{80, 0xffff}}},
		{80, 81, [][2]uint16{{80, 0xfffe}}},
		{81, 83, [][2]uint16{{81, 0xffff}, {82, 0xfffe}}},
		{1000, 1999, nil}, // checked by coverage below
		{0, 65535, [][2]uint16{{0, 0}}},
	} {
		got := PortRange(tc.start, tc.end)
		if tc.want != nil {
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PortRange(%d, %d) (-want +got):\n%s", tc.start, tc.end, diff)
			}
		}
		// Every port in the range matches exactly one pair, none outside.
		for p := 0; p < 65536; p++ {
			n := 0
			for _, r := range got {
				if uint16(p)&r[1] == r[0] {
					n++
				}
			}
			in := p >= int(tc.start) && p <= int(tc.end)
			if (in && n != 1) || (!in && n != 0) {
				t.Fatalf("PortRange(%d, %d): port %d matched %d pairs", tc.start, tc.end, p, n)
			}
		}
	}
}

func TestIPBlockExcept(t *testing.T) {
	for _, tc := range []struct {
		cidr   string
		except []string
		want   []string
	}{
		{"10.0.0.0/24", nil, []string{"10.0.0.0/24"}},
		{"10.0.0.0/24", []string{"10.0.0.128/25"}, []string{"10.0.0.0/25"}},
		{"10.0.0.0/24", []string{"10.0.0.5/32"}, []string{"10.0.0.128/25", "10.0.0.64/26", "10.0.0.32/27", "10.0.0.16/28", "10.0.0.8/29", "10.0.0.0/30", "10.0.0.6/31", "10.0.0.4/32"}},
		{"10.0.0.0/24", []string{"10.0.0.0/16"}, nil},
		{"10.0.0.0/24", []string{"10.1.0.0/16"}, []string{"10.0.0.0/24"}},
		{"0.0.0.0/0", []string{"10.0.0.0/8", "192.168.0.0/16"}, nil},
	} {
		var got []string
		for _, p := range ipBlockPrefixes(&apiv1.IPBlock{Cidr: tc.cidr, Except: tc.except}) {
			got = append(got, p.String())
		}
		if tc.want == nil && tc.cidr == "0.0.0.0/0" {
			// Check by membership instead of listing 30 prefixes.
			for _, a := range []string{"10.1.2.3", "192.168.7.7", "11.0.0.1", "8.8.8.8", "192.167.255.255"} {
				in := false
				for _, p := range got {
					in = in || netip.MustParsePrefix(p).Contains(netip.MustParseAddr(a))
				}
				want := !strings.HasPrefix(a, "10.") && !strings.HasPrefix(a, "192.168.")
				if in != want {
					t.Errorf("0.0.0.0/0 except 10/8, 192.168/16: %s in=%v, want %v", a, in, want)
				}
			}
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s except %v (-want +got):\n%s", tc.cidr, tc.except, diff)
		}
	}
}

// TestFlowCountBound: one policy with N peers, M local pods and K ports
// costs about N+M+K flows, never N×M×K.
func TestFlowCountBound(t *testing.T) {
	const n, m, k = 500, 50, 5
	var peers, local []*apiv1.Member
	for i := range n {
		peers = append(peers, member("y", fmt.Sprintf("peer-%d", i), fmt.Sprintf("10.245.%d.%d", i/250, i%250+1)))
	}
	for i := range m {
		local = append(local, member("x", fmt.Sprintf("pod-%d", i), fmt.Sprintf("10.244.1.%d", i+2)))
	}
	var ports []*apiv1.Port
	for i := range k {
		ports = append(ports, &apiv1.Port{Protocol: "TCP", Port: int32(8000 + 10*i)})
	}
	s := state([]*apiv1.Policy{k8s("big", true, false, []uint32{1},
		&apiv1.Rule{Direction: apiv1.Direction_INGRESS, AddressGroups: []uint32{2}, Ports: ports})},
		[]*client.Group{group(1, local...)}, []*client.Group{group(2, peers...)})
	r := Compute(s, node)
	validate(t, r)
	got := len(r.Flows) - len(Compute(client.NewState(), node).Flows)
	if bound := 1.2 * (n + m + k); float64(got) > bound {
		t.Errorf("%d flows for N=%d, M=%d, K=%d; want at most %.0f", got, n, m, k, bound)
	}
	t.Logf("N=%d M=%d K=%d: %d flows (N+M+K = %d)", n, m, k, got, n+m+k)
}

// TestManyRulesOnOnePodFitAMessage: 10,000 rules applying to one pod share
// its clause; no flow may carry more conjunction actions than fit an
// OpenFlow message.
func TestManyRulesOnOnePodFitAMessage(t *testing.T) {
	var rules []*apiv1.Rule
	for i := range 10000 {
		rules = append(rules, &apiv1.Rule{Direction: apiv1.Direction_INGRESS,
			IpBlocks: []*apiv1.IPBlock{{Cidr: fmt.Sprintf("10.%d.%d.%d/32", 200+i/65536, (i/256)%256, i%256)}},
			Ports:    []*apiv1.Port{{Protocol: "TCP", Port: int32(10000 + i%5000)}}})
	}
	s := state([]*apiv1.Policy{k8s("bulk", true, false, []uint32{1}, rules...)},
		[]*client.Group{group(1, member("x", "b", "10.244.2.2"))}, nil)
	r := Compute(s, node)
	validate(t, r)
	for _, f := range r.Flows {
		if len(f.Actions) > maxConjsPerFlow {
			t.Fatalf("flow %s carries %d actions", f.Key(), len(f.Actions))
		}
	}
	t.Logf("10,000 rules: %d flows", len(r.Flows))
}

func BenchmarkCompute10kRules(b *testing.B) {
	var rules []*apiv1.Rule
	for i := range 10000 {
		rules = append(rules, &apiv1.Rule{Direction: apiv1.Direction_INGRESS,
			IpBlocks: []*apiv1.IPBlock{{Cidr: fmt.Sprintf("10.%d.%d.%d/32", 200+i/65536, (i/256)%256, i%256)}},
			Ports:    []*apiv1.Port{{Protocol: "TCP", Port: int32(10000 + i%5000)}}})
	}
	s := state([]*apiv1.Policy{k8s("bulk", true, false, []uint32{1}, rules...)},
		[]*client.Group{group(1, member("x", "b", "10.244.2.2"))}, nil)
	b.ReportAllocs()
	for b.Loop() {
		r := Compute(s, node)
		b.ReportMetric(float64(len(r.Flows)), "flows")
	}
}

func TestSameFlow(t *testing.T) {
	a := flow.Flow{Table: IngressRules, Priority: 200, Actions: []flow.Action{flow.Conjunction(1, 1, 2), flow.Conjunction(2, 1, 3)}}
	b := a
	b.Actions = []flow.Action{flow.Conjunction(1, 1, 2), flow.Conjunction(2, 1, 3)}
	if !SameFlow(&a, &b) {
		t.Errorf("equal flows differ")
	}
	b.Actions = []flow.Action{flow.Conjunction(1, 1, 2), flow.Conjunction(2, 2, 3)}
	c := a
	c.Goto = flow.NextTable()
	d := a
	d.Tag = 9
	for _, x := range []flow.Flow{b, c, d} {
		if SameFlow(&a, &x) {
			t.Errorf("%s and %s are the same flow?", a.String(), x.String())
		}
	}
}
