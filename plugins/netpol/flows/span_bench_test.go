package flows

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
	"switchyard.dev/switchyard/controller/client"
	"switchyard.dev/switchyard/controller/compute"
)

// smallNamespaces builds the SmallNamespaces shape of Antrea's controller
// scale test (as controller/internal/workload does, which this module
// cannot import from here): 25,000 namespaces of 4 pods and 3 policies
// (a default deny and two allow rules between pods of one label), pods on
// 1,000 nodes.
func smallNamespaces(e *compute.Engine) error {
	r := rand.New(rand.NewPCG(1, 2))
	sel := func(kv ...string) metav1.LabelSelector {
		s := metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			s.MatchLabels[kv[i]] = kv[i+1]
		}
		return s
	}
	both := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	for i := range 25000 {
		ns := "ns-" + strconv.Itoa(i)
		e.UpsertNamespace(ns, map[string]string{"app": ns})
		for j := range 4 {
			k := strconv.Itoa(j/2 + 1)
			ip := r.Uint32()
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-" + strconv.Itoa(j), Labels: map[string]string{"app-" + k: "scale-" + k}},
				Spec:   corev1.PodSpec{NodeName: "node-" + strconv.Itoa(r.IntN(1000))},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("%d.%d.%d.%d", 10+byte(ip>>24)%100, byte(ip>>16), byte(ip>>8), byte(ip))}}}}
			in, _ := compute.PodFromKubernetes(p)
			e.UpsertPod(in)
		}
		nps := []*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default-deny-all"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: both}}}
		for _, k := range []string{"1", "2"} {
			s := sel("app-"+k, "scale-"+k)
			nps = append(nps, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "np-" + k},
				Spec: networkingv1.NetworkPolicySpec{PodSelector: s, PolicyTypes: both,
					Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &s}}}}}})
		}
		for _, np := range nps {
			if err := e.UpsertKubernetesNetworkPolicy(np); err != nil {
				return err
			}
		}
	}
	return nil
}

// spanState turns a node's snapshot into the state netpol holds, as the
// stream would deliver it.
func spanState(snap compute.NodeSnapshot) *client.State {
	s := client.NewState()
	members := func(ms []compute.Member) map[client.MemberKey]*apiv1.Member {
		out := map[client.MemberKey]*apiv1.Member{}
		for _, m := range ms {
			pm := &apiv1.Member{Namespace: m.Namespace, Name: m.Name, Node: m.Node}
			for _, ip := range m.IPs {
				pm.Ips = append(pm.Ips, ip.AsSlice())
			}
			for _, p := range m.Ports {
				pm.Ports = append(pm.Ports, &apiv1.NamedPort{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port})
			}
			out[client.KeyOf(pm)] = pm
		}
		return out
	}
	for _, g := range snap.AppliedToGroups {
		s.AppliedToGroups[uint32(g.ID)] = &client.Group{ID: uint32(g.ID), Members: members(g.Members)}
	}
	for _, g := range snap.AddressGroups {
		s.AddressGroups[uint32(g.ID)] = &client.Group{ID: uint32(g.ID), Members: members(g.Members)}
	}
	ids := func(gs []compute.GroupID) []uint32 {
		out := make([]uint32, len(gs))
		for i, g := range gs {
			out[i] = uint32(g)
		}
		return out
	}
	for _, p := range snap.Policies {
		ap := &apiv1.Policy{Uid: p.UID, SourceKind: p.Source.String(), Namespace: p.Namespace, Name: p.Name, Generation: p.Generation,
			TierPriority: p.TierPriority, Priority: p.Priority, IsolateIngress: p.IsolateIngress, IsolateEgress: p.IsolateEgress,
			AppliedToGroups: ids(p.AppliedToGroups)}
		for _, r := range p.Rules {
			ap.Rules = append(ap.Rules, &apiv1.Rule{Name: r.Name, Direction: apiv1.Direction(r.Direction), Action: apiv1.Action(r.Action),
				Priority: r.Priority, AnyPeer: r.AnyPeer, AddressGroups: ids(r.AddressGroups), AppliedToGroups: ids(r.AppliedToGroups)})
		}
		s.Policies[p.UID] = ap
	}
	return s
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkSpanMemorySmallNamespaces: what netpol holds for one node of
// SmallNamespaces: the span (client.State) and its computed flows, as heap
// bytes, and the time to compute the flows.
func BenchmarkSpanMemorySmallNamespaces(b *testing.B) {
	e := compute.New(nil)
	if err := smallNamespaces(e); err != nil {
		b.Fatal(err)
	}
	snap := e.Snapshot("node-0")
	e = nil
	for b.Loop() {
		before := heap()
		s := spanState(snap)
		r := Compute(s, Node{CTZone: 1})
		held := heap() - before
		b.ReportMetric(float64(held), "heap-bytes")
		b.ReportMetric(float64(len(s.Policies)), "policies")
		b.ReportMetric(float64(len(r.Flows)), "flows")
		runtime.KeepAlive(s)
		runtime.KeepAlive(r)
	}
}
