package cluster_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/itest/upstream"
)

func TestControlPlane(t *testing.T) {
	start := time.Now()
	cp := controlplane.Start(t)
	t.Logf("control plane ready in %s", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	body, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil || string(body) != "ok" {
		t.Fatalf("/readyz = %q, %v; want ok", body, err)
	}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "harness-check"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	list, err := cp.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing namespaces: %v", err)
	}
	found := false
	for _, ns := range list.Items {
		found = found || ns.Name == "harness-check"
	}
	if !found {
		t.Fatalf("namespace harness-check not listed; got %d namespaces", len(list.Items))
	}
	if _, err := os.Stat(cp.Kubeconfig); err != nil {
		t.Fatalf("kubeconfig not written: %v", err)
	}
}

// bridgeConflist is a reference-plugin network (bridge + host-local), so the
// harness's kubelet path (libcni, K8S_POD_* args, Pod status) is checked
// without depending on Switchyard's own CNI.
func bridgeConflist(n *cluster.Node) []byte {
	b, _ := json.Marshal(map[string]any{
		"cniVersion": "1.0.0", "name": "itest-bridge",
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
			"ipam": map[string]any{
				"type": "host-local", "dataDir": filepath.Join(n.Dir, "ipam"),
				"ranges": [][]map[string]string{{{"subnet": n.PodCIDR.String()}}},
			},
		}},
	})
	return b
}

func TestThreeNodeCluster(t *testing.T) {
	cp := controlplane.Start(t)
	plugins, err := upstream.EnsureCNIPlugins(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	runPrefix := testenv.Prefix + testenv.RunID()

	t.Run("bring up, probe, tear down", func(t *testing.T) {
		start := time.Now()
		c := cluster.Start(t, cluster.Options{Nodes: 3, Client: cp.Client})
		t.Logf("3 nodes up in %s", time.Since(start).Round(time.Millisecond))

		for _, n := range c.Nodes {
			if got := strings.TrimSpace(n.OVS.Vsctl(t, "get", "bridge", "br-int", "datapath_type")); got != "netdev" {
				t.Errorf("%s: br-int datapath_type = %q, want netdev", n.Name, got)
			}
			obj, err := cp.Client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("Node %s: %v", n.Name, err)
			}
			if obj.Spec.PodCIDR != n.PodCIDR.String() || len(obj.Status.Addresses) == 0 || obj.Status.Addresses[0].Address != n.UnderlayIP.String() {
				t.Errorf("Node %s: podCIDR %q addresses %v; want %s and InternalIP %s", n.Name, obj.Spec.PodCIDR, obj.Status.Addresses, n.PodCIDR, n.UnderlayIP)
			}
		}

		var eps []probe.Endpoint
		for _, n := range c.Nodes {
			eps = append(eps, probe.Endpoint{Name: n.Name, NetNS: n.NetNS, IP: n.UnderlayIP})
			probe.Serve(t, n.NetNS, 8080)
		}
		for _, proto := range []probe.Protocol{probe.ICMP, probe.TCP, probe.UDP, probe.SCTP} {
			m := probe.Run(eps, eps, proto, 8080, probe.MatrixOptions{SkipSelf: true})
			t.Logf("underlay %s:\n%s", proto, m)
			if d := m.Diff(probe.Expect(eps, eps, true, true)); d != "" {
				t.Errorf("underlay %s connectivity differs (got!want):\n%s", proto, d)
			}
		}
		// A port nobody serves must read as unreachable, or the probes prove nothing.
		for _, proto := range []probe.Protocol{probe.TCP, probe.UDP, probe.SCTP} {
			closed := probe.Run(eps[:1], eps[1:2], proto, 8081, probe.MatrixOptions{Timeout: 500 * time.Millisecond})
			if d := closed.Diff(probe.Expect(eps[:1], eps[1:2], false, false)); d != "" {
				t.Errorf("%s probe to a closed port reported reachable:\n%s", proto, d)
			}
		}

		// A service on the root namespace's loopback (like the apiserver)
		// reached from inside a node through Forward.
		echo, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer echo.Close()
		go func() {
			for {
				c, err := echo.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); io.Copy(c, c) }()
			}
		}()
		inNode := cluster.Forward(t, c.Nodes[1].NetNS, "127.0.0.1:6443", echo.Addr().String())
		if inNode != "127.0.0.1:6443" {
			t.Errorf("Forward listened on %s, want 127.0.0.1:6443", inNode)
		}
		if err := probe.Check(c.Nodes[1].NetNS, probe.TCP, net.IPv4(127, 0, 0, 1), 6443, 0); err != nil {
			t.Errorf("forwarded service not reachable from inside %s: %v", c.Nodes[1].Name, err)
		}

		// The kubelet path through libcni, with the reference plugins.
		n1 := c.Nodes[0]
		if err := os.MkdirAll(n1.CNIConfDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(n1.CNIConfDir, "10-bridge.conflist"), bridgeConflist(n1), 0o644); err != nil {
			t.Fatal(err)
		}
		n1.CNIBinDir = plugins
		a := c.AddPod(t, cluster.PodSpec{Name: "a", Namespace: "ns1", Node: n1, Labels: map[string]string{"app": "a"}})
		b := c.AddPod(t, cluster.PodSpec{Name: "b", Namespace: "ns1", Node: n1})
		if !n1.PodCIDR.Contains(a.IP()) || !n1.PodCIDR.Contains(b.IP()) || a.IP().Equal(b.IP()) {
			t.Fatalf("pod IPs %s and %s: want two distinct addresses in %s", a.IP(), b.IP(), n1.PodCIDR)
		}
		obj, err := cp.Client.CoreV1().Pods("ns1").Get(context.Background(), "a", metav1.GetOptions{})
		if err != nil || obj.Status.PodIP != a.IP().String() || obj.Spec.NodeName != n1.Name {
			t.Fatalf("Pod ns1/a status: podIP %q node %q err %v; want %s on %s", obj.Status.PodIP, obj.Spec.NodeName, err, a.IP(), n1.Name)
		}
		if err := c.CheckPod(a); err != nil {
			t.Errorf("CNI CHECK of ns1/a: %v", err)
		}
		probe.Serve(t, b.NetNS, 80)
		for _, proto := range []probe.Protocol{probe.ICMP, probe.TCP, probe.UDP, probe.SCTP} {
			if err := probe.Check(a.NetNS, proto, b.IP(), 80, 0); err != nil {
				t.Errorf("pod a -> pod b over %s: %v", proto, err)
			}
		}
		c.DeletePod(t, b)
		if _, err := os.Stat(netns.Path(b.NetNS)); !os.IsNotExist(err) {
			t.Errorf("pod b's namespace still exists after DeletePod")
		}
		if _, err := cp.Client.CoreV1().Pods("ns1").Get(context.Background(), "b", metav1.GetOptions{}); err == nil {
			t.Errorf("Pod object ns1/b still exists after DeletePod")
		}
	})

	left, err := netns.List(runPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("namespaces left after teardown: %v", left)
	}
	var leaked []string
	for _, p := range testenv.ProcessesOfRun(testenv.RunID()) {
		// The control plane belongs to the outer test and is still meant to run.
		if !strings.Contains(p, testenv.Prefix+testenv.RunID()+"-cp-") {
			leaked = append(leaked, p)
		}
	}
	if len(leaked) != 0 {
		t.Errorf("processes left after teardown:\n%s", strings.Join(leaked, "\n"))
	}
}
