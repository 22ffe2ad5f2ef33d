package realnode_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/realnode"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/itest/upstream"
)

// TestNodesRegister: two kubelets register, get a pod CIDR from the
// controller-manager, report v1.37.2, and stay NotReady for want of a CNI
// configuration; the control plane publishes what real pods need (the
// kubernetes Service's EndpointSlice on the fabric address, the root CA
// ConfigMap, default ServiceAccounts).
func TestNodesRegister(t *testing.T) {
	c := realnode.Start(t, realnode.Options{Nodes: 2})
	ctx := context.Background()
	for _, n := range c.Nodes {
		err := c.WaitNode(n.Name, func(node *corev1.Node) error {
			if err := realnode.Ready(false)(node); err != nil {
				return err
			}
			ready := readyCondition(node)
			if !strings.Contains(ready.Message, "network") && !strings.Contains(ready.Message, "cni") {
				return fmt.Errorf("NotReady, but not for the network: %s", ready.Message)
			}
			if node.Spec.PodCIDR == "" {
				return fmt.Errorf("no PodCIDR")
			}
			if got := node.Status.NodeInfo.KubeletVersion; got != upstream.KubernetesVersion {
				return testenv.Permanent(fmt.Errorf("kubelet version %q, want %s", got, upstream.KubernetesVersion))
			}
			if !hasAddress(node, n.IP.String()) {
				return fmt.Errorf("addresses %v lack InternalIP %s", node.Status.Addresses, n.IP)
			}
			return nil
		}, 60*time.Second)
		if err != nil {
			t.Fatalf("%v\nkubelet log:\n%s", err, n.KubeletLog(20))
		}
	}
	err := testenv.Eventually("kubernetes EndpointSlice and kube-root-ca.crt", 30*time.Second, 200*time.Millisecond, func() error {
		slices, err := c.CP.Client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kubernetes"})
		if err != nil {
			return err
		}
		found := false
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				found = found || (len(e.Addresses) > 0 && e.Addresses[0] == realnode.APIAddress.String())
			}
		}
		if !found {
			return fmt.Errorf("no kubernetes EndpointSlice with %s", realnode.APIAddress)
		}
		_, err = c.CP.Client.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReferenceCNIPods: with the bridge + host-local reference plugins in
// the nodes' CNI dirs, the nodes turn Ready, a pod on each node runs with
// an IP from its node's CIDR, a client pod reaches a server pod on the
// other node, and deleting a pod makes the kubelet tear its network down
// (CNI DEL: IP released, veth gone).
func TestReferenceCNIPods(t *testing.T) {
	c := realnode.Start(t, realnode.Options{Nodes: 2})
	c.InstallReferenceCNI(t)
	for _, n := range c.Nodes {
		if err := c.WaitNode(n.Name, realnode.Ready(true), 60*time.Second); err != nil {
			t.Fatalf("%v\nkubelet log:\n%s", err, n.KubeletLog(20))
		}
	}
	servers := map[string]*corev1.Pod{}
	for _, n := range c.Nodes {
		name := "server-" + n.Name
		c.CreatePod(t, "default", realnode.AgnhostPod(name, n.Name, corev1.RestartPolicyAlways, "netexec", "--http-port=8080"))
		p, err := c.WaitPod("default", name, realnode.Running, 90*time.Second)
		if err != nil {
			t.Fatalf("%v\nkubelet log:\n%s\ncontainerd log:\n%s", err, n.KubeletLog(20), n.ContainerdLog(20))
		}
		node, _ := c.CP.Client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		_, cidr, _ := net.ParseCIDR(node.Spec.PodCIDR)
		if p.Spec.NodeName != n.Name || !cidr.Contains(net.ParseIP(p.Status.PodIP)) {
			t.Fatalf("pod %s on %s with IP %s, want on %s in %s", name, p.Spec.NodeName, p.Status.PodIP, n.Name, cidr)
		}
		servers[n.Name] = p
	}
	// A client pod on every node reaches every server, its own node's and
	// the other's.
	var targets []*corev1.Pod
	for _, n := range c.Nodes {
		targets = append(targets, servers[n.Name])
	}
	m := c.Connectivity(t, "default", targets, 8080)
	t.Logf("pod-to-pod connectivity (agnhost connect, TCP 8080):\n%s", m)
	if f := m.Failures(); f != "" {
		t.Errorf("connectivity failures:\n%s", f)
	}

	// DEL: delete the first server and look at its node.
	n := c.Nodes[0]
	victim := servers[n.Name]
	ipFile := filepath.Join(n.Private("/var/lib/cni"), "networks", realnode.RefNetwork, victim.Status.PodIP)
	if _, err := os.Stat(ipFile); err != nil {
		t.Fatalf("host-local holds no reservation for %s before the delete: %v", victim.Status.PodIP, err)
	}
	vethsBefore := bridgePorts(t, n.NetNS)
	if err := c.CP.Client.CoreV1().Pods("default").Delete(context.Background(), victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitPodGone("default", victim.Name, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	err := testenv.Eventually("CNI DEL of "+victim.Name, 30*time.Second, 200*time.Millisecond, func() error {
		if _, err := os.Stat(ipFile); err == nil {
			return fmt.Errorf("IP %s still reserved", victim.Status.PodIP)
		}
		if got := bridgePorts(t, n.NetNS); got >= vethsBefore {
			return fmt.Errorf("%d ports on cni0, %d before the delete", got, vethsBefore)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// bridgePorts counts the veths attached to cni0 in the node's namespace
// (`ip -o` prints one line per link).
func bridgePorts(t *testing.T, ns string) int {
	t.Helper()
	out, err := testenv.Run("ip", "-n", ns, "-o", "link", "show", "master", "cni0")
	if err != nil {
		t.Fatal(err)
	}
	if out = strings.TrimSpace(out); out == "" {
		return 0
	}
	return strings.Count(out, "\n") + 1
}

func readyCondition(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func hasAddress(n *corev1.Node, ip string) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address == ip {
			return true
		}
	}
	return false
}
