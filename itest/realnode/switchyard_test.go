package realnode_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/realnode"
	"switchyard.dev/switchyard/itest/testenv"
)

// TestSwitchyardInstall is the operator's path on real nodes: our images
// imported on each node, switchyard.yml applied, install-cni runs and the
// nodes turn Ready, a Deployment of agnhost pods spread over both nodes
// gets IPs from our CNI (called by containerd), the pod-to-pod matrix
// passes, still passes after the agent pods are deleted and recreated by
// their DaemonSet, and deleting a pod makes the kubelet call DEL (its OVS
// port goes).
func TestSwitchyardInstall(t *testing.T) {
	c := realnode.Start(t, realnode.Options{Nodes: 2, Images: realnode.ProductImages(t)})
	c.Apply(t, realnode.Manifest(t))
	for _, n := range c.Nodes {
		if err := c.WaitNode(n.Name, realnode.Ready(true), 180*time.Second); err != nil {
			t.Fatalf("%v\nkube-system:\n%s", err, c.Describe("kube-system", 15))
		}
	}
	d := realnode.AgnhostDeployment("web", 4, "netexec", "--http-port=8080")
	if _, err := c.CP.Client.AppsV1().Deployments("default").Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	err := testenv.Eventually("4 web pods Running with an IP", 120*time.Second, 250*time.Millisecond, func() error {
		running, total, err := c.RunningPods("default", "app=web")
		if err != nil {
			return err
		}
		if len(running) < 4 {
			return fmt.Errorf("%d of 4 Running (%d pods)", len(running), total)
		}
		pods = running
		return nil
	})
	if err != nil {
		t.Fatalf("%v\ndefault:\n%s\nkube-system:\n%s", err, c.Describe("default", 10), c.Describe("kube-system", 15))
	}
	perNode := map[string]int{}
	for _, p := range pods {
		node, err := c.CP.Client.CoreV1().Nodes().Get(context.Background(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, cidr, _ := net.ParseCIDR(node.Spec.PodCIDR)
		if !cidr.Contains(net.ParseIP(p.Status.PodIP)) {
			t.Errorf("pod %s on %s has IP %s outside the node's %s", p.Name, p.Spec.NodeName, p.Status.PodIP, cidr)
		}
		perNode[p.Spec.NodeName]++
	}
	if len(perNode) != 2 {
		t.Errorf("pods spread %v, want both nodes", perNode)
	}
	var targets []*corev1.Pod
	for i := range pods {
		targets = append(targets, &pods[i])
	}
	m := c.Connectivity(t, "default", targets, 8080)
	t.Logf("pod-to-pod connectivity (agnhost connect, TCP 8080):\n%s", m)
	if f := m.Failures(); f != "" {
		t.Errorf("connectivity failures:\n%s\nkube-system:\n%s", f, c.Describe("kube-system", 15))
	}

	// Restart the agent pods (delete them; the DaemonSet recreates them):
	// the running pods stay connected, and new probes are networked by
	// the new agents.
	agents, err := c.CP.Client.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app=switchyard,component=agent"})
	if err != nil || len(agents.Items) != 2 {
		t.Fatalf("agent pods: %v (%d found)", err, len(agents.Items))
	}
	for _, a := range agents.Items {
		if err := c.CP.Client.CoreV1().Pods("kube-system").Delete(context.Background(), a.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range agents.Items {
		if err := c.WaitPodGone("kube-system", a.Name, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitSystemReady("kube-system", 120*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, c.Describe("kube-system", 10))
	}
	m = c.Connectivity(t, "default", targets, 8080)
	t.Logf("after the agent pods were recreated:\n%s", m)
	if f := m.Failures(); f != "" {
		t.Errorf("connectivity failures after the agent restart:\n%s", f)
	}

	// DEL: delete one pod; its node's br-int loses the pod's port and the
	// node namespace the pod's veth.
	victim := pods[0]
	n := nodeNamed(c, victim.Spec.NodeName)
	portsBefore := ovsPorts(t, n)
	if err := c.CP.Client.CoreV1().Pods("default").Delete(context.Background(), victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitPodGone("default", victim.Name, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	err = testenv.Eventually("CNI DEL of "+victim.Name, 30*time.Second, 200*time.Millisecond, func() error {
		now := ovsPorts(t, n)
		for p := range now {
			if _, ok := portsBefore[p]; !ok {
				delete(now, p) // a port of the replacement pod
			}
		}
		if len(now) != len(portsBefore)-1 {
			return fmt.Errorf("br-int ports %v, before the delete %v", keys(now), keys(portsBefore))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func nodeNamed(c *realnode.Cluster, name string) *realnode.Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// ovsPorts lists br-int's ports on the node, through the node's private
// OVS run directory (the OVS DaemonSet's hostPath /var/run/openvswitch).
func ovsPorts(t *testing.T, n *realnode.Node) map[string]struct{} {
	t.Helper()
	out, err := testenv.Run("ovs-vsctl", "--db=unix:"+n.Private("/run/openvswitch")+"/db.sock", "--timeout=5", "list-ports", "br-int")
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]struct{}{}
	for _, p := range strings.Fields(out) {
		ports[p] = struct{}{}
	}
	return ports
}

func keys(m map[string]struct{}) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
