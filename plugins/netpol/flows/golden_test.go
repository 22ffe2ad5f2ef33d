package flows

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
	"switchyard.dev/switchyard/controller/client"
)

var (
	podA  = member("x", "a", "10.244.1.5", &apiv1.NamedPort{Name: "serve-80-tcp", Protocol: "TCP", Port: 80})
	podB  = member("x", "b", "10.244.1.6", &apiv1.NamedPort{Name: "serve-80-tcp", Protocol: "TCP", Port: 8080})
	podYB = member("y", "b", "10.244.2.6", &apiv1.NamedPort{Name: "serve-80-tcp", Protocol: "TCP", Port: 80})
	tcp80 = &apiv1.Port{Protocol: "TCP", Port: 80}
)

func ingress(r *apiv1.Rule) *apiv1.Rule { r.Direction = apiv1.Direction_INGRESS; return r }
func egress(r *apiv1.Rule) *apiv1.Rule  { r.Direction = apiv1.Direction_EGRESS; return r }

func native(uid string, tier, prio int32, atg []uint32, rules ...*apiv1.Rule) *apiv1.Policy {
	return &apiv1.Policy{Uid: uid, SourceKind: "ClusterNetworkPolicy", Name: uid, TierPriority: tier, Priority: prio,
		AppliedToGroups: atg, Rules: rules}
}

// goldenCases hold a span and the exact flows it adds to the static ones.
var goldenCases = []struct {
	name string
	s    *client.State
	want []string
}{
	{
		name: "default deny ingress: isolation only",
		s:    state([]*apiv1.Policy{k8s("deny", true, false, []uint32{1})}, []*client.Group{group(1, podA, podB)}, nil),
		want: []string{
			"table=netpol.ingress_isolation, priority=100, ip,nw_dst=10.244.1.5 actions=drop",
			"table=netpol.ingress_isolation, priority=100, ip,nw_dst=10.244.1.6 actions=drop",
		},
	},
	{
		name: "ingress from peers on TCP 80: N+M+K+1 flows",
		s: state([]*apiv1.Policy{k8s("p1", true, false, []uint32{1},
			ingress(&apiv1.Rule{AddressGroups: []uint32{2}, Ports: []*apiv1.Port{tcp80}}))},
			[]*client.Group{group(1, podA)}, []*client.Group{group(2, podB, podYB)}),
		want: []string{
			"table=netpol.ingress_rules, priority=200, conj_id=502961574 actions=goto_table:@stage:Conntrack",
			"table=netpol.ingress_rules, priority=200, ip,nw_dst=10.244.1.5 actions=conjunction(502961574,2/3)",
			"table=netpol.ingress_rules, priority=200, ip,nw_src=10.244.1.6 actions=conjunction(502961574,1/3)",
			"table=netpol.ingress_rules, priority=200, ip,nw_src=10.244.2.6 actions=conjunction(502961574,1/3)",
			"table=netpol.ingress_rules, priority=200, tcp,tp_dst=80 actions=conjunction(502961574,3/3)",
			"table=netpol.ingress_isolation, priority=100, ip,nw_dst=10.244.1.5 actions=drop",
		},
	},
	{
		name: "egress to an ipBlock with except on a UDP range, any-port rule as plain flows",
		s: state([]*apiv1.Policy{k8s("p2", false, true, []uint32{1},
			egress(&apiv1.Rule{IpBlocks: []*apiv1.IPBlock{{Cidr: "10.244.0.0/16", Except: []string{"10.244.0.0/17"}}},
				Ports: []*apiv1.Port{{Protocol: "UDP", Port: 81, EndPort: 83}}}),
			egress(&apiv1.Rule{AnyPeer: true, Ports: []*apiv1.Port{{Protocol: "SCTP"}}}))},
			[]*client.Group{group(1, podA)}, nil),
		want: []string{
			"table=netpol.egress_rules, priority=200, conj_id=202267644 actions=goto_table:@stage:Routing",
			"table=netpol.egress_rules, priority=200, conj_id=3811813855 actions=goto_table:@stage:Routing",
			"table=netpol.egress_rules, priority=200, ip,nw_dst=10.244.128.0/17 actions=conjunction(3811813855,2/3)",
			"table=netpol.egress_rules, priority=200, ip,nw_src=10.244.1.5 actions=conjunction(202267644,1/2),conjunction(3811813855,1/3)",
			"table=netpol.egress_rules, priority=200, sctp actions=conjunction(202267644,2/2)",
			"table=netpol.egress_rules, priority=200, udp,tp_dst=0x52/0xfffe actions=conjunction(3811813855,3/3)",
			"table=netpol.egress_rules, priority=200, udp,tp_dst=81 actions=conjunction(3811813855,3/3)",
			"table=netpol.egress_isolation, priority=100, ip,nw_src=10.244.1.5 actions=drop",
		},
	},
	{
		name: "ingress any peer any port: plain flows",
		s: state([]*apiv1.Policy{k8s("all", true, false, []uint32{1}, ingress(&apiv1.Rule{AnyPeer: true}))},
			[]*client.Group{group(1, podA)}, nil),
		want: []string{
			"table=netpol.ingress_rules, priority=210, ip,nw_dst=10.244.1.5 actions=goto_table:@stage:Conntrack",
			"table=netpol.ingress_isolation, priority=100, ip,nw_dst=10.244.1.5 actions=drop",
		},
	},
	{
		name: "named port resolved per destination pod",
		s: state([]*apiv1.Policy{k8s("named", true, false, []uint32{1},
			ingress(&apiv1.Rule{AnyPeer: true, Ports: []*apiv1.Port{{Protocol: "TCP", Name: "serve-80-tcp"}}}))},
			[]*client.Group{group(1, podA, podB)}, nil),
		want: []string{
			"table=netpol.ingress_rules, priority=200, conj_id=2920077389 actions=goto_table:@stage:Conntrack",
			"table=netpol.ingress_rules, priority=200, conj_id=51703501 actions=goto_table:@stage:Conntrack",
			"table=netpol.ingress_rules, priority=200, ip,nw_dst=10.244.1.5 actions=conjunction(2920077389,1/2)",
			"table=netpol.ingress_rules, priority=200, ip,nw_dst=10.244.1.6 actions=conjunction(51703501,1/2)",
			"table=netpol.ingress_rules, priority=200, tcp,tp_dst=80 actions=conjunction(2920077389,2/2)",
			"table=netpol.ingress_rules, priority=200, tcp,tp_dst=8080 actions=conjunction(51703501,2/2)",
			"table=netpol.ingress_isolation, priority=100, ip,nw_dst=10.244.1.5 actions=drop",
			"table=netpol.ingress_isolation, priority=100, ip,nw_dst=10.244.1.6 actions=drop",
		},
	},
	{
		name: "egress to anywhere on a named port: resolved against every pod the controller sent",
		s: state([]*apiv1.Policy{k8s("eg-named", false, true, []uint32{1},
			egress(&apiv1.Rule{AnyPeer: true, AddressGroups: []uint32{9}, Ports: []*apiv1.Port{{Protocol: "TCP", Name: "serve-80-tcp"}, {Protocol: "UDP", Port: 53}}}))},
			[]*client.Group{group(1, podA)}, []*client.Group{group(9, podA, podB, podYB)}),
		want: []string{
			"table=netpol.egress_rules, priority=200, conj_id=1083113433 actions=goto_table:@stage:Routing",
			"table=netpol.egress_rules, priority=200, conj_id=1134068598 actions=goto_table:@stage:Routing",
			"table=netpol.egress_rules, priority=200, conj_id=2222432030 actions=goto_table:@stage:Routing",
			"table=netpol.egress_rules, priority=200, ip,nw_dst=10.244.1.5 actions=conjunction(1134068598,2/3)",
			"table=netpol.egress_rules, priority=200, ip,nw_dst=10.244.1.6 actions=conjunction(2222432030,2/3)",
			"table=netpol.egress_rules, priority=200, ip,nw_dst=10.244.2.6 actions=conjunction(1134068598,2/3)",
			"table=netpol.egress_rules, priority=200, ip,nw_src=10.244.1.5 actions=conjunction(1083113433,1/2),conjunction(1134068598,1/3),conjunction(2222432030,1/3)",
			"table=netpol.egress_rules, priority=200, tcp,tp_dst=80 actions=conjunction(1134068598,3/3)",
			"table=netpol.egress_rules, priority=200, tcp,tp_dst=8080 actions=conjunction(2222432030,3/3)",
			"table=netpol.egress_rules, priority=200, udp,tp_dst=53 actions=conjunction(1083113433,2/2)",
			"table=netpol.egress_isolation, priority=100, ip,nw_src=10.244.1.5 actions=drop",
		},
	},
	{
		name: "native tiers: drop above allow, pass, reject with logging, baseline",
		s: state([]*apiv1.Policy{
			native("app", 250, 5, []uint32{1}, ingress(&apiv1.Rule{Action: apiv1.Action_ALLOW, AnyPeer: true})),
			native("sec", 100, 1, []uint32{1},
				ingress(&apiv1.Rule{Action: apiv1.Action_DROP, AddressGroups: []uint32{2}, Priority: 0}),
				ingress(&apiv1.Rule{Action: apiv1.Action_PASS, AnyPeer: true, Ports: []*apiv1.Port{tcp80}, Priority: 1}),
				ingress(&apiv1.Rule{Action: apiv1.Action_REJECT, AnyPeer: true, Logging: true, Ports: []*apiv1.Port{{Protocol: "UDP", Port: 81}}, Priority: 2})),
			native("base", 253, 1, []uint32{1}, ingress(&apiv1.Rule{Action: apiv1.Action_DROP, AnyPeer: true})),
		}, []*client.Group{group(1, podA)}, []*client.Group{group(2, podYB)}),
		want: []string{
			"table=netpol.ingress_native, priority=60000, conj_id=2803129117 actions=drop",
			"table=netpol.ingress_native, priority=60000, ip,nw_dst=10.244.1.5 actions=conjunction(2803129117,2/2)",
			"table=netpol.ingress_native, priority=60000, ip,nw_src=10.244.2.6 actions=conjunction(2803129117,1/2)",
			"table=netpol.ingress_native, priority=59999, conj_id=1274335833 actions=goto_table:@netpol.ingress_rules",
			"table=netpol.ingress_native, priority=59999, ip,nw_dst=10.244.1.5 actions=conjunction(1274335833,1/2)",
			"table=netpol.ingress_native, priority=59999, tcp,tp_dst=80 actions=conjunction(1274335833,2/2)",
			"table=netpol.ingress_native, priority=59998, conj_id=3173080568 actions=controller(max_len=128,userdata=52.00.79.75.4b.4c)",
			"table=netpol.ingress_native, priority=59998, ip,nw_dst=10.244.1.5 actions=conjunction(3173080568,1/2)",
			"table=netpol.ingress_native, priority=59998, udp,tp_dst=81 actions=conjunction(3173080568,2/2)",
			"table=netpol.ingress_native, priority=59997, ip,nw_dst=10.244.1.5 actions=goto_table:@stage:Conntrack",
			"table=netpol.ingress_baseline, priority=60000, ip,nw_dst=10.244.1.5 actions=drop",
		},
	},
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			r := Compute(tc.s, node)
			validate(t, r)
			got := spanFlows(r)
			if os.Getenv("NETPOL_PRINT") != "" {
				t.Logf("\n%s", strings.Join(got, "\n"))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("flows (-want +got):\n%s", diff)
			}
			// The same span computes the same flows: a resync rewrites nothing.
			if diff := cmp.Diff(strs(r.Flows), strs(Compute(tc.s, node).Flows)); diff != "" {
				t.Errorf("recomputing differs (-first +second):\n%s", diff)
			}
		})
	}
}
