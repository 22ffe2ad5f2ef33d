package netpolmodel

import (
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/probe"
)

func TestSmoke(t *testing.T) {
	e := Start(t, Options{Nodes: 1})
	t.Logf("placement: %s", e.Placement())
	e.Check(t, "no policy", probe.TCP, 80, e.NewReachability(true), 20*time.Second)
	e.Apply(t, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny", Namespace: "x"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}})
	start := time.Now()
	e.Check(t, "deny ingress x", probe.TCP, 80, e.NewReachability(true).Set("*", "x/*", false), 20*time.Second)
	t.Logf("enforced after %s", time.Since(start))
}
