package netpolmodel

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/probe"
)

const (
	tcp  = corev1.ProtocolTCP
	udp  = corev1.ProtocolUDP
	sctp = corev1.ProtocolSCTP
)

// check is one truth table to hold for a protocol and port.
type check struct {
	proto probe.Protocol
	port  int
	want  func(e *Env) *Reachability
}

// step changes something and checks the outcome.
type step struct {
	what   string
	do     func(t *testing.T, e *Env)
	checks []check
}

type scenario struct {
	name     string
	policies func(e *Env) []*networkingv1.NetworkPolicy
	checks   []check
	then     []step
}

func allow(e *Env) *Reachability { return e.NewReachability(true) }

// tcp80 is the usual check.
func tcp80(want func(e *Env) *Reachability) []check {
	return []check{{probe.TCP, 80, want}}
}

func pols(ps ...*networkingv1.NetworkPolicy) func(*Env) []*networkingv1.NetworkPolicy {
	return func(*Env) []*networkingv1.NetworkPolicy { return ps }
}

func ip32(e *Env, pod string) string { return e.Pods[pod].IP().String() + "/32" }

// denyInto is the table where nothing reaches to, except from the pairs
// in allowed (from, to patterns).
func denyInto(to string, allowed ...string) func(e *Env) *Reachability {
	return func(e *Env) *Reachability {
		r := e.NewReachability(true).Set("*", to, false)
		for i := 0; i+1 < len(allowed); i += 2 {
			r.Set(allowed[i], allowed[i+1], true)
		}
		return r
	}
}

func denyFrom(from string, allowed ...string) func(e *Env) *Reachability {
	return func(e *Env) *Reachability {
		r := e.NewReachability(true).Set(from, "*", false)
		for i := 0; i+1 < len(allowed); i += 2 {
			r.Set(allowed[i], allowed[i+1], true)
		}
		return r
	}
}

// scenarios are the Kubernetes e2e model's cases, and a few of ours.
var scenarios = []scenario{
	{name: "default-deny-ingress", policies: pols(Types(Policy("x", "deny", nil), true, false)),
		checks: []check{{probe.TCP, 80, denyInto("x/*")}, {probe.UDP, 81, denyInto("x/*")}, {probe.SCTP, 80, denyInto("x/*")}}},
	{name: "default-deny-egress", policies: pols(Types(Policy("x", "deny", nil), false, true)),
		checks: []check{{probe.TCP, 80, denyFrom("x/*")}, {probe.UDP, 80, denyFrom("x/*")}}},
	{name: "default-deny-both", policies: pols(Types(Policy("x", "deny", nil), true, true)),
		checks: tcp80(func(e *Env) *Reachability {
			return e.NewReachability(true).Set("x/*", "*", false).Set("*", "x/*", false)
		})},
	{name: "allow-all-ingress", policies: pols(In(Policy("x", "all", nil), nil)), checks: tcp80(allow)},
	{name: "deny-all-and-allow-all-add-up", policies: pols(Types(Policy("x", "deny", nil), true, false), In(Policy("x", "all", nil), nil)),
		checks: tcp80(allow)},
	{name: "allow-all-egress", policies: pols(Out(Policy("x", "all", nil), nil)), checks: tcp80(allow)},
	{name: "ingress-pod-selector", policies: pols(In(Policy("x", "a-from-b", Labels("pod", "a")), Peers(PodPeer(Labels("pod", "b"))))),
		checks: tcp80(denyInto("x/a", "x/b", "x/a"))},
	{name: "ingress-namespace-selector", policies: pols(In(Policy("x", "a-from-y", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "y"))))),
		checks: tcp80(denyInto("x/a", "y/*", "x/a"))},
	{name: "ingress-namespace-and-pod-selector", policies: pols(In(Policy("x", "a-from-yc", Labels("pod", "a")),
		Peers(NSPodPeer(Labels("ns", "y"), Labels("pod", "c"))))),
		checks: tcp80(denyInto("x/a", "y/c", "x/a"))},
	{name: "ingress-namespace-or-pod-selector", policies: pols(In(Policy("x", "a-from-y-or-c", Labels("pod", "a")),
		Peers(NSPeer(Labels("ns", "y")), PodPeer(Labels("pod", "c"))))),
		checks: tcp80(denyInto("x/a", "y/*", "x/a", "x/c", "x/a"))},
	{name: "ingress-namespace-match-expressions-in", policies: pols(In(Policy("x", "a-from-yz", Labels("pod", "a")),
		Peers(NSPeer(Expr("ns", metav1.LabelSelectorOpIn, "y", "z"))))),
		checks: tcp80(denyInto("x/a", "y/*", "x/a", "z/*", "x/a"))},
	{name: "ingress-pod-match-expressions-notin", policies: pols(In(Policy("x", "a-not-b", Labels("pod", "a")),
		Peers(PodPeer(Expr("pod", metav1.LabelSelectorOpNotIn, "b"))))),
		checks: tcp80(denyInto("x/a", "x/c", "x/a"))},
	{name: "ingress-pod-match-expressions-exists", policies: pols(In(Policy("x", "exists", nil),
		Peers(NSPodPeer(&metav1.LabelSelector{}, Expr("pod", metav1.LabelSelectorOpExists))))),
		checks: tcp80(allow)},
	{name: "ingress-all-namespaces-pod-a", policies: pols(In(Policy("x", "from-any-a", Labels("pod", "a")),
		Peers(NSPodPeer(&metav1.LabelSelector{}, Labels("pod", "a"))))),
		checks: tcp80(denyInto("x/a", "*/a", "x/a"))},
	{name: "ingress-same-namespace-only", policies: pols(In(Policy("x", "same-ns", nil), Peers(PodPeer(&metav1.LabelSelector{})))),
		checks: tcp80(denyInto("x/*", "x/*", "x/*"))},
	{name: "ingress-ipblock-except", policies: func(e *Env) []*networkingv1.NetworkPolicy {
		return []*networkingv1.NetworkPolicy{In(Policy("x", "cidr", Labels("pod", "a")), Peers(IPPeer("10.244.0.0/16", ip32(e, "y/b"))))}
	}, checks: tcp80(func(e *Env) *Reachability { return e.NewReachability(true).Set("y/b", "x/a", false) })},
	{name: "ingress-ipblock-only-one-pod", policies: func(e *Env) []*networkingv1.NetworkPolicy {
		return []*networkingv1.NetworkPolicy{In(Policy("x", "cidr", Labels("pod", "a")), Peers(IPPeer(ip32(e, "z/c"))))}
	}, checks: tcp80(denyInto("x/a", "z/c", "x/a"))},
	{name: "egress-ipblock-except", policies: func(e *Env) []*networkingv1.NetworkPolicy {
		return []*networkingv1.NetworkPolicy{Out(Policy("x", "cidr", Labels("pod", "a")), Peers(IPPeer("10.244.0.0/16", ip32(e, "z/c"))))}
	}, checks: tcp80(func(e *Env) *Reachability { return e.NewReachability(true).Set("x/a", "z/c", false) })},
	{name: "ingress-port-80", policies: pols(In(Policy("x", "p80", Labels("pod", "a")), nil, Port(tcp, 80))),
		checks: []check{{probe.TCP, 80, allow}, {probe.TCP, 81, denyInto("x/a")}, {probe.UDP, 80, denyInto("x/a")}}},
	{name: "ingress-port-81-from-y", policies: pols(In(Policy("x", "p81", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "y"))), Port(tcp, 81))),
		checks: []check{{probe.TCP, 80, denyInto("x/a")}, {probe.TCP, 81, denyInto("x/a", "y/*", "x/a")}}},
	{name: "ingress-named-port-tcp", policies: pols(In(Policy("x", "named", Labels("pod", "a")), nil, Named(tcp, "serve-80-tcp"))),
		checks: []check{{probe.TCP, 80, allow}, {probe.TCP, 81, denyInto("x/a")}}},
	{name: "ingress-named-port-udp", policies: pols(In(Policy("x", "named", Labels("pod", "a")), nil, Named(udp, "serve-81-udp"))),
		checks: []check{{probe.UDP, 81, allow}, {probe.UDP, 80, denyInto("x/a")}, {probe.TCP, 81, denyInto("x/a")}}},
	{name: "egress-named-port", policies: pols(Out(Policy("x", "named", Labels("pod", "a")), nil, Named(tcp, "serve-81-tcp"))),
		checks: []check{{probe.TCP, 81, allow}, {probe.TCP, 80, denyFrom("x/a")}}},
	{name: "ingress-endport-80-81", policies: pols(In(Policy("x", "range", Labels("pod", "a")), nil, Range(tcp, 80, 81))),
		checks: []check{{probe.TCP, 80, allow}, {probe.TCP, 81, allow}, {probe.UDP, 81, denyInto("x/a")}}},
	{name: "ingress-endport-81-90", policies: pols(In(Policy("x", "range", Labels("pod", "a")), nil, Range(udp, 81, 90))),
		checks: []check{{probe.UDP, 81, allow}, {probe.UDP, 80, denyInto("x/a")}}},
	{name: "egress-endport-70-80", policies: pols(Out(Policy("x", "range", Labels("pod", "a")), nil, Range(tcp, 70, 80))),
		checks: []check{{probe.TCP, 80, allow}, {probe.TCP, 81, denyFrom("x/a")}}},
	{name: "ingress-several-ports-protocols", policies: pols(In(Policy("x", "multi", Labels("pod", "a")), nil, Port(tcp, 80), Port(udp, 81))),
		checks: []check{{probe.TCP, 80, allow}, {probe.UDP, 81, allow}, {probe.TCP, 81, denyInto("x/a")}, {probe.UDP, 80, denyInto("x/a")}}},
	{name: "ingress-sctp", policies: pols(In(Policy("x", "sctp", Labels("pod", "a")), nil, Port(sctp, 80))),
		checks: []check{{probe.SCTP, 80, allow}, {probe.TCP, 80, denyInto("x/a")}, {probe.SCTP, 81, denyInto("x/a")}}},
	{name: "ingress-protocol-only-udp", policies: pols(In(Policy("x", "udp", Labels("pod", "a")), nil, Port(udp, 0))),
		checks: []check{{probe.UDP, 80, allow}, {probe.UDP, 81, allow}, {probe.TCP, 80, denyInto("x/a")}}},
	{name: "two-rules-different-peers-and-ports", policies: pols(In(In(Policy("x", "two", Labels("pod", "a")),
		Peers(PodPeer(Labels("pod", "b"))), Port(tcp, 80)), Peers(NSPeer(Labels("ns", "y"))), Port(udp, 81))),
		checks: []check{{probe.TCP, 80, denyInto("x/a", "x/b", "x/a")}, {probe.UDP, 81, denyInto("x/a", "y/*", "x/a")}}},
	{name: "egress-to-namespace-y-pod-a", policies: pols(Out(Policy("x", "to-ya", Labels("pod", "a")), Peers(NSPodPeer(Labels("ns", "y"), Labels("pod", "a"))))),
		checks: tcp80(denyFrom("x/a", "x/a", "y/a"))},
	{name: "egress-udp-only", policies: pols(Out(Policy("x", "udp-out", nil), nil, Port(udp, 80))),
		checks: []check{{probe.UDP, 80, allow}, {probe.TCP, 80, denyFrom("x/*")}}},
	{name: "egress-same-namespace-only", policies: pols(Out(Policy("x", "same-ns", nil), Peers(PodPeer(&metav1.LabelSelector{})))),
		checks: tcp80(denyFrom("x/*", "x/*", "x/*"))},
	{name: "several-policies-add-up", policies: pols(
		In(Policy("x", "from-y", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "y")))),
		In(Policy("x", "from-z", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "z"))))),
		checks: tcp80(denyInto("x/a", "y/*", "x/a", "z/*", "x/a"))},
	{name: "ingress-and-egress-policies-combined", policies: pols(
		Out(Policy("x", "a-to-y", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "y")))),
		In(Policy("y", "from-x", nil), Peers(NSPeer(Labels("ns", "x"))))),
		checks: tcp80(func(e *Env) *Reachability {
			return e.NewReachability(true).Set("x/a", "*", false).Set("*", "y/*", false).Set("x/*", "y/*", true)
		})},
	{name: "egress-isolated-server-still-answers", policies: pols(Types(Policy("y", "no-egress", nil), false, true)),
		checks: []check{{probe.TCP, 80, denyFrom("y/*")}, {probe.UDP, 80, denyFrom("y/*")}}},
	{name: "deny-everywhere", policies: pols(Types(Policy("x", "d", nil), true, false), Types(Policy("y", "d", nil), true, false),
		Types(Policy("z", "d", nil), true, false)),
		checks: tcp80(func(e *Env) *Reachability { return e.NewReachability(false) })},
	{name: "policy-update", policies: pols(In(Policy("x", "upd", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "y"))))),
		checks: tcp80(denyInto("x/a", "y/*", "x/a")),
		then: []step{{what: "from y to from z", do: func(t *testing.T, e *Env) {
			e.Apply(t, In(Policy("x", "upd", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "z")))))
		}, checks: tcp80(denyInto("x/a", "z/*", "x/a"))}}},
	{name: "policy-delete", policies: pols(Types(Policy("x", "deny", nil), true, false)),
		checks: tcp80(denyInto("x/*")),
		then:   []step{{what: "delete", do: func(t *testing.T, e *Env) { e.DeleteAllPolicies(t) }, checks: tcp80(allow)}}},
	{name: "pod-label-change", policies: pols(In(Policy("x", "from-b", Labels("pod", "a")), Peers(PodPeer(Labels("pod", "b"))))),
		checks: tcp80(denyInto("x/a", "x/b", "x/a")),
		then: []step{{what: "x/c labelled pod=b", do: func(t *testing.T, e *Env) { e.LabelPod(t, "x/c", map[string]string{"pod": "b"}) },
			checks: tcp80(denyInto("x/a", "x/b", "x/a", "x/c", "x/a"))}}},
	{name: "namespace-label-change", policies: pols(In(Policy("x", "from-y", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "y"))))),
		checks: tcp80(denyInto("x/a", "y/*", "x/a")),
		then: []step{{what: "z labelled ns=y", do: func(t *testing.T, e *Env) { e.LabelNamespace(t, "z", map[string]string{"ns": "y"}) },
			checks: tcp80(denyInto("x/a", "y/*", "x/a", "z/*", "x/a"))}}},
	{name: "pod-created-after-policy", policies: pols(Types(Policy("x", "deny", Labels("pod", "d")), true, false),
		In(Policy("x", "a-from-d", Labels("pod", "a")), Peers(PodPeer(Labels("pod", "d"))))),
		checks: tcp80(denyInto("x/a")),
		then: []step{{what: "x/d created", do: func(t *testing.T, e *Env) { e.AddPod("x", "d") },
			checks: tcp80(func(e *Env) *Reachability {
				return e.NewReachability(true).Set("*", "x/d", false).Set("*", "x/a", false).Set("x/d", "x/a", true)
			})}}},
	{name: "egress-to-z-except-isolated-z-c", policies: pols(
		Out(Policy("x", "to-z", Labels("pod", "a")), Peers(NSPeer(Labels("ns", "z"))), Port(tcp, 80)),
		Types(Policy("z", "c-deny", Labels("pod", "c")), true, false)),
		checks: tcp80(func(e *Env) *Reachability {
			return e.NewReachability(true).Set("x/a", "*", false).Set("x/a", "z/*", true).Set("*", "z/c", false)
		})},
	{name: "ingress-empty-from-with-port", policies: pols(In(Policy("x", "p81", nil), nil, Port(tcp, 81))),
		checks: []check{{probe.TCP, 81, allow}, {probe.TCP, 80, denyInto("x/*")}}},
}

// modelLabels restores the pods' and namespaces' labels after a scenario.
func restore(t *testing.T, e *Env) {
	for _, ns := range Namespaces {
		e.LabelNamespace(t, ns, map[string]string{"ns": ns})
		for _, p := range PodNames {
			e.LabelPod(t, ns+"/"+p, map[string]string{"pod": p})
		}
	}
	for _, k := range append([]string(nil), e.Names...) {
		ns, name, _ := cut(k)
		if !isModelPod(name) {
			e.DeletePod(ns, name)
		}
	}
}

func cut(k string) (string, string, bool) {
	for i := range k {
		if k[i] == '/' {
			return k[:i], k[i+1:], true
		}
	}
	return k, "", false
}

func isModelPod(name string) bool {
	for _, p := range PodNames {
		if p == name {
			return true
		}
	}
	return false
}

// realizeWait bounds how long a check waits for the datapath to agree.
const realizeWait = 15 * time.Second

func runScenario(t *testing.T, e *Env, sc scenario) {
	defer func() {
		e.DeleteAllPolicies(t)
		restore(t, e)
		e.Check(t, "after "+sc.name+": everything allowed again", probe.TCP, 80, e.NewReachability(true), realizeWait)
	}()
	for _, np := range sc.policies(e) {
		e.Apply(t, np)
	}
	for _, c := range sc.checks {
		e.Check(t, sc.name, c.proto, c.port, c.want(e), realizeWait)
	}
	for _, st := range sc.then {
		st.do(t, e)
		for _, c := range st.checks {
			e.Check(t, sc.name+": "+st.what, c.proto, c.port, c.want(e), realizeWait)
		}
	}
}
