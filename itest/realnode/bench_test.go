package realnode_test

import (
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/realnode"
)

// BenchmarkPodStartup: from Deployment create until 30 agnhost pods are
// Running with an IP, spread over two real nodes, with the bridge +
// host-local reference plugins called by containerd.
func BenchmarkPodStartup(b *testing.B) {
	c := realnode.Start(b, realnode.Options{Nodes: 2})
	c.InstallReferenceCNI(b)
	for _, n := range c.Nodes {
		if err := c.WaitNode(n.Name, realnode.Ready(true), 60*time.Second); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var ref time.Duration
	for i := 0; i < b.N; i++ {
		ref += c.DeploymentStartup(b, "default", realnode.AgnhostDeployment("startup-ref", 30, "pause"), 5*time.Minute)
	}
	b.StopTimer()
	b.ReportMetric(ref.Seconds()/float64(b.N), "ref-s/30pods")
}
