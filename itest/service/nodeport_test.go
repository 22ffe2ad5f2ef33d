package service

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"switchyard.dev/switchyard/itest/testenv"
)

// whoPorts is the whoami Service port over TCP and UDP.
var whoPorts = []svcPort{{"who", corev1.ProtocolTCP, 90, whoamiPort}, {"who-udp", corev1.ProtocolUDP, 90, whoamiPort}}

// nodePorts returns the NodePort of each port name.
func nodePorts(s *corev1.Service) map[string]int {
	out := map[string]int{}
	for _, p := range s.Spec.Ports {
		out[p.Name] = int(p.NodePort)
	}
	return out
}

// TestNodePort: an "external" host on the underlay reaches NodePort
// Services on the nodes' addresses. With externalTrafficPolicy Cluster
// any node serves it from any endpoint, and the endpoint sees the
// serving node's gateway address (the SNAT that brings answers back);
// with Local only a node with an endpoint serves it, the endpoint sees the
// client's own address, and a node without one rejects at once.
//
// Pods are clients too: a pod dialling a NodePort on its own node's
// address, on another node's, and an endpoint reaching itself through its
// node's NodePort. Their answers must go back through the node that
// translated the node address (its kernel undoes that DNAT), not straight
// to the pod, which would see them come from an address it never dialled.
// externalTrafficPolicy Local is about clients outside the cluster: a
// node's own pods, and the node, get every endpoint, as with kube-proxy;
// so do the pods of other nodes, SNATed to the node's gateway address.
func TestNodePort(t *testing.T) {
	e := start(t, 3)
	n1, n2, n3 := e.c.Nodes[0], e.c.Nodes[1], e.c.Nodes[2]
	b2, b3 := e.backend(t, "b-2", n2), e.backend(t, "b-3", n3)
	c1 := e.client(t, "c-1", n1)
	ext, extIP := e.c.AddExternal(t, 250)
	nodePort := func(p corev1.ServiceExternalTrafficPolicy) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeNodePort, p }
	}
	cl := nodePorts(e.createService(t, "np-cluster", whoPorts, nodePort(corev1.ServiceExternalTrafficPolicyCluster)))
	lo := nodePorts(e.createService(t, "np-local", whoPorts, nodePort(corev1.ServiceExternalTrafficPolicyLocal)))
	e.endpoints(t, "np-cluster", whoPorts, b2, b3)
	e.endpoints(t, "np-local", whoPorts, b2, b3)
	t.Logf("NodePorts: cluster %v, local %v; external host %s", cl, lo, extIP)

	gw1 := n1.PodCIDR.IP.To4()
	gw1 = []byte{gw1[0], gw1[1], gw1[2], gw1[3] + 1}
	for _, network := range []string{"tcp", "udp"} {
		port := map[string]string{"tcp": "who", "udp": "who-udp"}[network]
		// Cluster, through node-1, which has no endpoint: SNATed.
		seen := map[string]int{}
		for i := range 20 {
			var got, as string
			what := fmt.Sprintf("%s to node-1 %s:%d (Cluster), try %d", network, n1.UnderlayIP, cl[port], i)
			eventually(t, what, func() (err error) {
				got, as, err = who(ext, network, n1.UnderlayIP, cl[port])
				return err
			})
			if as != gw1.String() {
				t.Errorf("%s: the endpoint saw %s, want node-1's gateway %s", what, as, gw1)
			}
			seen[got]++
		}
		if seen[b2.Name] == 0 || seen[b3.Name] == 0 {
			t.Errorf("%s NodePort (Cluster) through node-1 reached %v, want both endpoints", network, seen)
		}
		// Local, through node-2: its own endpoint, the client's address.
		eventually(t, network+" to node-2 (Local)", func() error {
			got, as, err := who(ext, network, n2.UnderlayIP, lo[port])
			if err != nil {
				return err
			}
			if got != b2.Name || as != extIP.String() {
				return fmt.Errorf("answered by %s seeing %s; want %s seeing the client %s", got, as, b2.Name, extIP)
			}
			return nil
		})
		// The node itself, dialling its own NodePort (Cluster): balanced
		// too (the output hook, not prerouting, sees its packets).
		eventually(t, network+" from node-1 to its own NodePort", func() error {
			got, _, err := who(n1.NetNS, network, n1.UnderlayIP, cl[port])
			if err != nil {
				return err
			}
			if got != b2.Name && got != b3.Name {
				return fmt.Errorf("answered by %s, want an endpoint of np-cluster", got)
			}
			return nil
		})
		// Pods as clients. Each case names who dials which node's address,
		// which policy, and who may answer.
		for _, pc := range []struct {
			what   string
			from   string
			node   net.IP
			port   int
			answer []string
		}{
			{"pod on node-1 to node-1 (Cluster)", c1.NetNS, n1.UnderlayIP, cl[port], []string{b2.Name, b3.Name}},
			{"pod on node-1 to node-3 (Cluster)", c1.NetNS, n3.UnderlayIP, cl[port], []string{b2.Name, b3.Name}},
			// Local is about external clients: node-1 has no endpoint,
			// but its pods and itself get the cluster-wide ones, and so do
			// the pods of other nodes, on any node.
			{"pod on node-1 to node-2 (Local, in-cluster client)", c1.NetNS, n2.UnderlayIP, lo[port], []string{b2.Name, b3.Name}},
			{"pod on node-1 to node-1 (Local, in-cluster client)", c1.NetNS, n1.UnderlayIP, lo[port], []string{b2.Name, b3.Name}},
			{"node-1 to itself (Local, in-cluster client)", n1.NetNS, n1.UnderlayIP, lo[port], []string{b2.Name, b3.Name}},
			{"endpoint b-2 to its own node-2 (Local, hairpin)", b2.NetNS, n2.UnderlayIP, lo[port], []string{b2.Name}},
			{"endpoint b-3 to node-3 (Cluster)", b3.NetNS, n3.UnderlayIP, cl[port], []string{b2.Name, b3.Name}},
		} {
			// Every case is tried (Errorf), so one run shows which fail.
			what := fmt.Sprintf("%s %s:%d over %s", pc.what, pc.node, pc.port, network)
			err := testenv.Eventually(what, 20*time.Second, 100*time.Millisecond, func() error {
				got, _, err := who(pc.from, network, pc.node, pc.port)
				if err != nil {
					return err
				}
				if !slices.Contains(pc.answer, got) {
					return fmt.Errorf("answered by %s, want one of %v", got, pc.answer)
				}
				return nil
			})
			if err != nil {
				t.Errorf("%v", err)
			}
		}
		// A pod of another node dialling node-1's Local NodePort, where
		// there is no endpoint: every endpoint may answer, and sees
		// node-1's gateway address (SNATed, so the answer comes back
		// through node-1, which undid the node address's DNAT).
		seen = map[string]int{}
		for i := range 10 {
			what := fmt.Sprintf("%s from b-3 on node-3 to node-1 %s:%d (Local, a pod of another node), try %d", network, n1.UnderlayIP, lo[port], i)
			eventually(t, what, func() error {
				got, as, err := who(b3.NetNS, network, n1.UnderlayIP, lo[port])
				if err != nil {
					return err
				}
				if as != gw1.String() {
					return fmt.Errorf("answered by %s seeing %s, want node-1's gateway %s", got, as, gw1)
				}
				seen[got]++
				return nil
			})
		}
		if seen[b2.Name]+seen[b3.Name] != 10 {
			t.Errorf("%s: a pod of node-3 through node-1's Local NodePort reached %v, want only endpoints of np-local", network, seen)
		}
		// Local, through node-1: no local endpoint, refused.
		start := time.Now()
		_, _, err := who(ext, network, n1.UnderlayIP, lo[port])
		if o := outcome(err); o != "refused" {
			t.Errorf("%s to node-1 (Local, no endpoint there): %s after %s, want refused", network, o, time.Since(start))
		}
	}
}
