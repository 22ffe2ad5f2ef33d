package realnode_test

import (
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/realnode"
)

// BenchmarkPodStartup: from Deployment create until 30 agnhost pods are
// Running with an IP, spread over two real nodes, first with the bridge +
// host-local reference plugins, then, on the same kubelets, with
// Switchyard installed from switchyard.yml; both called by containerd.
// Reports each in seconds and ours/reference (target ≤ 1.2).
func BenchmarkPodStartup(b *testing.B) {
	c := realnode.Start(b, realnode.Options{Nodes: 2, Images: realnode.ProductImages(b)})
	c.InstallReferenceCNI(b)
	waitReady(b, c)
	const replicas = 30
	b.ResetTimer()
	var ref, ours time.Duration
	for i := 0; i < b.N; i++ {
		ref += c.DeploymentStartup(b, "default", realnode.AgnhostDeployment("startup-ref", replicas, "pause"), 5*time.Minute)
	}
	b.StopTimer()
	// Same kubelets, our CNI: the reference conflist goes, ours comes
	// with the manifests (install-cni), and the nodes turn Ready again.
	c.RemoveCNI(b)
	c.Apply(b, realnode.WithUnderlay(b, realnode.Manifest(b)))
	if err := c.WaitSystemReady("kube-system", 180*time.Second); err != nil {
		b.Fatalf("%v\nkube-system:\n%s", err, c.Describe("kube-system", 10))
	}
	waitReady(b, c)
	b.StartTimer()
	for i := 0; i < b.N; i++ {
		ours += c.DeploymentStartup(b, "default", realnode.AgnhostDeployment("startup-sy", replicas, "pause"), 5*time.Minute)
	}
	b.StopTimer()
	b.ReportMetric(ref.Seconds()/float64(b.N), "ref-s/30pods")
	b.ReportMetric(ours.Seconds()/float64(b.N), "switchyard-s/30pods")
	b.ReportMetric(ours.Seconds()/ref.Seconds(), "ours/ref")
}

func waitReady(b *testing.B, c *realnode.Cluster) {
	b.Helper()
	for _, n := range c.Nodes {
		if err := c.WaitNode(n.Name, realnode.Ready(true), 180*time.Second); err != nil {
			b.Fatalf("%v\nkube-system:\n%s", err, c.Describe("kube-system", 10))
		}
	}
}
