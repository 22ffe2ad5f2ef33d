package ops

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"switchyard.dev/switchyard/host/agent"
	"switchyard.dev/switchyard/host/yardctl"
	"switchyard.dev/switchyard/itest/netpolmodel"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

// TestTraceNetpol traces through the real netpol plugin: with x/a
// admitting TCP/80 from x/b only, a trace from x/c is dropped by netpol in
// its ingress isolation table, and one from x/b is delivered with netpol's
// rule hop naming the policy and rule; the injected packets confirm both
// on the datapath, through netpol's conntrack.
func TestTraceNetpol(t *testing.T) {
	testenv.RequireRoot(t)
	if binsErr != nil {
		t.Fatalf("a binary the test runs did not build: %v", binsErr)
	}
	e := netpolmodel.Start(t, netpolmodel.Options{Nodes: 1, Service: true})
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(80)
	e.Apply(t, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "allow-b"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "b"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	})
	xa, xb, xc := e.Pods["x/a"], e.Pods["x/b"], e.Pods["x/c"]
	err := testenv.Eventually("netpol to enforce x/allow-b", 30*time.Second, 200*time.Millisecond, func() error {
		if err := probe.Check(xc.NetNS, probe.TCP, xa.IP(), 80, 500*time.Millisecond); err == nil {
			return fmt.Errorf("x/c still reaches x/a")
		}
		return probe.Check(xb.NetNS, probe.TCP, xa.IP(), 80, 2*time.Second)
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := e.Agents[e.Cluster.Nodes[0].Name].APISocket
	trace := func(t *testing.T, from string, wantCode int, to ...string) yardctl.Trace {
		t.Helper()
		dst := xa.IP().String()
		if len(to) > 0 {
			dst = to[0]
		}
		args := []string{"--socket", sock, "trace", "--from", from, "--to", dst, "--port", "80"}
		// The first trace of this 5-tuple is the one checked (see
		// host/agent/inject.go on the first packet through conntrack).
		cmd := exec.Command(bins["yardctl"], append(args, "-o", "json")...)
		out, err := cmd.Output()
		table, _ := exec.Command(bins["yardctl"], args...).Output()
		t.Logf("yardctl %s\n%s", strings.Join(args[2:], " "), table)
		if code := cmd.ProcessState.ExitCode(); code != wantCode {
			t.Fatalf("exit %d (%v), want %d", code, err, wantCode)
		}
		var tr yardctl.Trace
		if err := json.Unmarshal(out, &tr); err != nil || len(tr.Nodes) != 1 {
			t.Fatalf("trace -o json: %v\n%s", err, out)
		}
		if d := tr.Nodes[0].Datapath; d == nil || !d.Confirmed {
			t.Errorf("the injected packet did not confirm the trace: %+v", d)
		} else {
			t.Logf("datapath confirmed after %d injection(s)", d.Attempts)
		}
		return tr
	}

	t.Run("denied: dropped by netpol's isolation", func(t *testing.T) {
		tr := trace(t, "x/c", yardctl.ExitNotDelivered)
		v := tr.Nodes[0].Verdicts[0]
		if v.Kind != agent.VerdictDropped || v.Plugin != "netpol" || v.Table != "netpol.ingress_isolation" || !strings.Contains(v.Description, "isolated for ingress") {
			t.Errorf("verdict %+v, want dropped by netpol in netpol.ingress_isolation, isolated for ingress", v)
		}
		for _, h := range tr.Nodes[0].Hops {
			if h.Priority == 0 && h.Description != "" {
				t.Errorf("a pass-through flow is described as a decision: %+v", h)
			}
		}
	})
	t.Run("allowed: delivered, the rule named", func(t *testing.T) {
		tr := trace(t, "x/b", 0)
		if v := tr.Nodes[0].Verdicts[0]; v.Kind != agent.VerdictDelivered || v.Pod != "x/a" {
			t.Errorf("verdict %+v, want delivered to x/a", v)
		}
		named := false
		for _, h := range tr.Nodes[0].Hops {
			named = named || (h.Plugin == "netpol" && strings.Contains(h.Description, "policy x/allow-b, ingress rule") && strings.HasSuffix(h.Description, "Allow"))
		}
		if !named {
			t.Errorf("no netpol hop names policy x/allow-b's ingress rule: %+v", tr.Nodes[0].Hops)
		}
	})
	t.Run("to a Service: the endpoint chosen, then the policy, then delivered", func(t *testing.T) {
		vip := e.ServiceClusterIP(t, "x", "web", "x/a")
		if err := testenv.Eventually("the Service to balance", 30*time.Second, 200*time.Millisecond, func() error {
			return probe.Check(xb.NetNS, probe.TCP, vip, 80, 2*time.Second)
		}); err != nil {
			t.Fatal(err)
		}
		tr := trace(t, "x/b", 0, vip.String())
		if v := tr.Nodes[0].Verdicts[0]; v.Kind != agent.VerdictDelivered || v.Pod != "x/a" {
			t.Errorf("verdict %+v, want delivered to x/a, the Service's endpoint", v)
		}
		chosen := false
		for _, h := range tr.Nodes[0].Hops {
			for _, n := range h.Notes {
				chosen = chosen || (h.Plugin == "service" && strings.Contains(n, "translated to "+xa.IP().String()+":80"))
			}
		}
		if !chosen {
			t.Errorf("no service hop names the endpoint %s:80 it chose: %+v", xa.IP(), tr.Nodes[0].Hops)
		}
	})
}
