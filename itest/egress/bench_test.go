package egress

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// benchEnv is a three-node cluster with a selected (web) and an
// unselected (plain) pod on every node and one Egress.
type benchEnv struct {
	*env
	web, plain []*cluster.Pod
	eip        string
}

func startBench(b *testing.B) *benchEnv {
	testenv.RequireRoot(b)
	e := &benchEnv{env: start(b, 3)}
	for _, n := range e.c.Nodes {
		e.web = append(e.web, e.c.AddPod(b, cluster.PodSpec{Name: fmt.Sprintf("web-%d", n.Index), Namespace: namespace, Node: n, Labels: map[string]string{"app": "web"}}))
		e.plain = append(e.plain, e.c.AddPod(b, cluster.PodSpec{Name: fmt.Sprintf("plain-%d", n.Index), Namespace: namespace, Node: n, Labels: map[string]string{"app": "plain"}}))
	}
	e.createPool(b, &crdv1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "pool"},
		Spec: crdv1.ExternalIPPoolSpec{IPRanges: []crdv1.IPRange{{CIDR: "198.18.0.96/28"}}}})
	e.createEgress(b, &crdv1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: crdv1.EgressSpec{ExternalIPPool: "pool", AppliedTo: crdv1.EgressAppliedTo{PodSelector: selector("app", "web")}}})
	e.eip = e.waitCondition(b, "web", crdv1.ConditionIPAssigned, metav1.ConditionTrue, crdv1.ReasonAssigned).Status.EgressIP
	return e
}

// holder is the node status names, and a web pod on another node.
func (e *benchEnv) holder(b *testing.B) (*cluster.Node, *cluster.Pod) {
	h := e.c.Node(e.getEgress(b, "web").Status.EgressNode)
	if h == nil {
		b.Fatalf("Egress web has no holder")
	}
	for _, p := range e.web {
		if p.Node != h {
			return h, p
		}
	}
	b.Fatalf("no web pod off the holder")
	return nil, nil
}

// BenchmarkFailover fails the holder over 10 times (agent killed and
// underlay link cut) and reports the time from the cut until the
// external server sees the Egress IP again from a pod on another node:
// p50 and p99 (the worst of 10). After each failover the node is brought
// back (link up, agent restarted) and the IP settles before the next.
// Run with -benchtime=1x.
func BenchmarkFailover(b *testing.B) {
	e := startBench(b)
	const failovers = 10
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		for i := range failovers {
			h, client := e.holder(b)
			e.seenEventually(b, client, e.eip)
			e.agents[h.Name].Process.Kill()
			if out, err := netns.Exec(e.c.Fabric, "ip", "link", "set", fmt.Sprintf("n%d", h.Index), "down"); err != nil {
				b.Fatalf("cut: %v %s", err, out)
			}
			t0 := time.Now()
			err := testenv.Eventually("failover", 30*time.Second, 10*time.Millisecond, func() error {
				if got, err := e.seenAs(client.NetNS, 200*time.Millisecond); err != nil || got != e.eip {
					return fmt.Errorf("seen as %q (%v)", got, err)
				}
				return nil
			})
			if err != nil {
				b.Fatalf("failover %d: %v", i, err)
			}
			took = append(took, time.Since(t0))
			b.Logf("failover %d: %s → %v", i, h.Name, took[len(took)-1].Round(time.Millisecond))
			// Bring the node back and let the IP settle.
			if out, err := netns.Exec(e.c.Fabric, "ip", "link", "set", fmt.Sprintf("n%d", h.Index), "up"); err != nil {
				b.Fatalf("uncut: %v %s", err, out)
			}
			e.agents[h.Name].Run(b)
			e.waitSynced(b, h, "egress")
			time.Sleep(3 * time.Second)
			for _, p := range e.web {
				e.seenEventually(b, p, e.eip)
			}
		}
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Milliseconds()), "p99-ms")
}

func (e *benchEnv) seenEventually(b *testing.B, p *cluster.Pod, want string) {
	b.Helper()
	err := testenv.Eventually(p.Key()+" seen as "+want, 30*time.Second, 50*time.Millisecond, func() error {
		if got, err := e.seenAs(p.NetNS, time.Second); err != nil || got != want {
			return fmt.Errorf("seen as %q (%v)", got, err)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSNATThroughput measures, in one run, TCP throughput (one
// iperf3 stream, 3 s) to the external host from: a selected pod on the
// holding node (SNAT to the Egress IP there), a selected pod on another
// node (tunnelled to the holder, then SNAT), and an unselected pod on the
// holding node (tunnel's masquerade to the node IP: the baseline, the same
// pods without Egress). Ratios are against the baseline. Run with
// -benchtime=1x -count=N and take medians.
func BenchmarkSNATThroughput(b *testing.B) {
	testenv.LookPath(b, "iperf3", "iperf3")
	e := startBench(b)
	h, remote := e.holder(b)
	var local, base *cluster.Pod
	for i, p := range e.web {
		if p.Node == h {
			local, base = p, e.plain[i]
		}
	}
	paths := []struct {
		name string
		pod  *cluster.Pod
		gbps float64
	}{{"base", base, 0}, {"egress-local", local, 0}, {"egress-remote", remote, 0}}
	b.ResetTimer()
	for i := range b.N {
		for j := range paths {
			p := &paths[(i+j)%len(paths)]
			p.gbps = iperf(b, e.extNS, e.extIP.String(), p.pod.NetNS)
		}
	}
	b.StopTimer()
	for _, p := range paths {
		b.ReportMetric(p.gbps, p.name+"-Gbit/s")
	}
	if paths[0].gbps > 0 {
		b.ReportMetric(paths[1].gbps/paths[0].gbps, "local/base")
		b.ReportMetric(paths[2].gbps/paths[0].gbps, "remote/base")
	}
}
