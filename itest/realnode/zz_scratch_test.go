package realnode

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/itest/upstream"
)

func TestScratchNodes(t *testing.T) {
	cdir, _ := upstream.EnsureContainerd(t.Logf)
	c := &Cluster{ContainerdBin: cdir, runc: "/usr/sbin/runc", Dir: testenv.Dir(t, "rn"),
		KubeBin: "/root/.cache/switchyard/tools/63e20ec632816df0.tmp"}
	mod, _ := testenv.SourceDir("..")
	pause, err := BuildPause(mod, c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	c.Images = []string{pause}
	c.start(t, Options{Nodes: 2})
	for _, n := range c.Nodes {
		err := c.WaitNode(n.Name, Ready(false), 30e9)
		t.Logf("%s: %v", n.Name, err)
	}
	nodes, _ := c.CP.Client.CoreV1().Nodes().List(t.Context(), metav1ListOptions())
	for _, n := range nodes.Items {
		t.Logf("%s podCIDR=%s version=%s runtime=%s addrs=%v", n.Name, n.Spec.PodCIDR, n.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.ContainerRuntimeVersion, n.Status.Addresses)
	}
	t.Logf("kubelet1:\n%s", c.Nodes[0].KubeletLog(15))
}

func metav1ListOptions() metav1.ListOptions { return metav1.ListOptions{} }

func TestScratchPods(t *testing.T) {
	cdir, _ := upstream.EnsureContainerd(t.Logf)
	c := &Cluster{ContainerdBin: cdir, runc: "/usr/sbin/runc", Dir: testenv.Dir(t, "rn"),
		KubeBin: "/root/.cache/switchyard/tools/63e20ec632816df0.tmp"}
	mod, _ := testenv.SourceDir("..")
	pause, err := BuildPause(mod, c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	c.Images = []string{pause}
	c.start(t, Options{Nodes: 2})
	c.InstallReferenceCNI(t)
	for _, n := range c.Nodes {
		if err := c.WaitNode(n.Name, Ready(true), 60e9); err != nil {
			t.Fatalf("%v\n%s\n%s", err, n.KubeletLog(5), n.ContainerdLog(15))
		}
	}
	p := AgnhostPod("p1", "node-1", "Always")
	p.Spec.Containers[0].Image = PauseImage
	c.CreatePod(t, "default", p)
	got, err := c.WaitPod("default", "p1", Running, 60e9)
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, c.Nodes[0].KubeletLog(30), c.Nodes[0].ContainerdLog(30))
	}
	t.Logf("pod IP %s on %s", got.Status.PodIP, got.Spec.NodeName)
	out, _ := testenv.Run("ip", "-n", c.Nodes[0].NetNS, "-o", "link")
	t.Logf("%s", out)
	out, _ = testenv.Run("ping", "-c1", "-W1", got.Status.PodIP)
	t.Logf("ping from root (expected to fail): %s", out)
	out, err = testenv.Run("ip", "netns", "exec", c.Nodes[1].NetNS, "ping", "-c1", "-W2", got.Status.PodIP)
	t.Logf("ping from node-2: %s %v", out, err)
}

func TestScratchDeploy(t *testing.T) {
	cdir, _ := upstream.EnsureContainerd(t.Logf)
	c := &Cluster{ContainerdBin: cdir, runc: "/usr/sbin/runc", Dir: testenv.Dir(t, "rn"),
		KubeBin: "/root/.cache/switchyard/tools/63e20ec632816df0.tmp"}
	mod, _ := testenv.SourceDir("..")
	pause, err := BuildPause(mod, c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	c.Images = []string{pause}
	c.start(t, Options{Nodes: 2})
	c.InstallReferenceCNI(t)
	for _, n := range c.Nodes {
		if err := c.WaitNode(n.Name, Ready(true), 60e9); err != nil {
			t.Fatalf("%v", err)
		}
	}
	d := AgnhostDeployment("startup", 30)
	d.Spec.Template.Spec.Containers[0].Image = PauseImage
	took := c.DeploymentStartup(t, "default", d, 300e9)
	t.Logf("30 pods in %s", took)
	out, _ := testenv.Run("ip", "-n", c.Nodes[0].NetNS, "-o", "link", "show", "master", "cni0")
	t.Logf("ports left on node-1 cni0: %q", out)
}
