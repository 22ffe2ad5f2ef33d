package netpolmodel

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"os/exec"
	"sort"
	"strconv"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/probe"
)

// BenchmarkNetpol runs netpol's system benchmarks on one 3-node model:
// realization latency, the install cost of 10,000 rules, and the datapath
// cost of those rules (throughput and connection rate against 0 rules, in
// the same run).
func BenchmarkNetpol(b *testing.B) {
	place := func(ns, pod string) int {
		h := fnv.New32a()
		h.Write([]byte(ns + "/" + pod))
		return int(h.Sum32() % 3)
	}
	e := Start(b, Options{Nodes: 3, Place: place, NetpolConfig: map[string]any{"countersInterval": "0s"}})
	b.Run("RealizationLatency", func(b *testing.B) { benchRealization(b, e) })
	b.Run("Datapath10kRules", func(b *testing.B) { benchDatapath(b, e) })
}

// benchRealization: 100 pods spread over 3 nodes are isolated; 50 times,
// a policy allowing a client into all of them is created, and the time
// until the client reaches a selected pod on every node (probes every
// 10 ms) is one sample. Reported as p50 and p99 in ms.
func benchRealization(b *testing.B, e *Env) {
	const pods, policies = 100, 50
	ns := "rl"
	e.createNamespace(ns)
	var targets []string // one per node
	seen := map[string]bool{}
	for i := range pods {
		name := fmt.Sprintf("p%d", i)
		p := e.AddPod(ns, name)
		if !seen[p.Node.Name] {
			seen[p.Node.Name] = true
			targets = append(targets, ns+"/"+name)
		}
	}
	client := e.AddPod(ns, "client")
	b.Cleanup(func() {
		e.CP.Client.NetworkingV1().NetworkPolicies(ns).DeleteCollection(b.Context(), metav1.DeleteOptions{}, metav1.ListOptions{})
		for i := range pods {
			e.DeletePod(ns, fmt.Sprintf("p%d", i))
		}
		e.DeletePod(ns, "client")
	})
	notClient := Expr("pod", metav1.LabelSelectorOpNotIn, "client")
	e.Apply(b, Types(Policy(ns, "deny", notClient), true, false))
	reach := func(to string, timeout time.Duration) bool {
		return probe.Check(client.NetNS, probe.TCP, e.Pods[to].IP(), 80, timeout) == nil
	}
	waitAll := func(ok bool) time.Duration {
		start := time.Now()
		for _, t := range targets {
			for reach(t, 20*time.Millisecond) != ok {
				if time.Since(start) > 30*time.Second {
					b.Fatalf("%s: reachable=%v not reached in 30s", t, ok)
				}
				if !ok {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}
		return time.Since(start)
	}
	waitAll(false)
	var samples []float64
	for range b.N {
		for i := range policies {
			np := In(Policy(ns, "allow-"+strconv.Itoa(i), notClient), Peers(PodPeer(Labels("pod", "client"))), Port(tcp, 80))
			start := time.Now()
			e.Apply(b, np)
			waitAll(true)
			samples = append(samples, float64(time.Since(start).Microseconds())/1000)
			if err := e.CP.Client.NetworkingV1().NetworkPolicies(ns).Delete(b.Context(), np.Name, metav1.DeleteOptions{}); err != nil {
				b.Fatal(err)
			}
			// Denied again everywhere (a deny shows as probes timing out).
			for _, t := range targets {
				for reach(t, 300*time.Millisecond) {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}
	}
	sort.Float64s(samples)
	b.ReportMetric(pct(samples, 50), "p50-ms")
	b.ReportMetric(pct(samples, 99), "p99-ms")
	b.ReportMetric(float64(len(targets)), "nodes")
	b.Logf("realization over %d policies selecting %d pods on %d nodes: p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		len(samples), pods, len(targets), pct(samples, 50), pct(samples, 99), samples[len(samples)-1])
}

func pct(s []float64, p int) float64 {
	if len(s) == 0 {
		return 0
	}
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

// benchDatapath: TCP throughput (iperf3) and new-connection rate from x/a
// to x/b with no policy, then with 10,000 rules applying to x/b installed
// (100 NetworkPolicies of 100 rules, each rule a /32 peer and a port, one
// of them allowing x/a), in the same run; also the install cost: time from
// the first create until netpol holds the flows, and their number.
func benchDatapath(b *testing.B, e *Env) {
	from, to := e.Pods["x/a"], e.Pods["x/b"]
	node := to.Node.Name
	measure := func() (bps, cps float64) {
		iperf := func() float64 {
			for range 10 {
				netns.Exec(to.NetNS, "iperf3", "-s", "-1", "-D", "-B", to.IP().String())
				time.Sleep(150 * time.Millisecond)
				out, err := exec.Command("ip", "netns", "exec", from.NetNS, "iperf3", "-c", to.IP().String(), "-t", "3", "-J").Output()
				var r struct {
					End struct {
						SumReceived struct {
							BitsPerSecond float64 `json:"bits_per_second"`
						} `json:"sum_received"`
					} `json:"end"`
				}
				if err == nil && json.Unmarshal(out, &r) == nil && r.End.SumReceived.BitsPerSecond > 0 {
					return r.End.SumReceived.BitsPerSecond
				}
			}
			b.Fatalf("iperf3 x/a -> x/b did not run")
			return 0
		}
		bps = iperf()
		dst := net.JoinHostPort(to.IP().String(), "80")
		n, start := 0, time.Now()
		for time.Since(start) < 2*time.Second {
			c, err := netns.Dial(from.NetNS, "tcp", dst, time.Second)
			if err != nil {
				b.Fatalf("connection x/a -> x/b: %v", err)
			}
			c.Close()
			n++
		}
		return bps, float64(n) / time.Since(start).Seconds()
	}
	flows := func() int { return e.Plugin(b, node, "netpol").Flows }
	for range b.N {
		base := flows()
		bps0, cps0 := measure()
		// 10,000 rules on x/b; x/a is allowed by the last rule of the last
		// policy, so its packets meet the whole rule set.
		var nps []*networkingv1.NetworkPolicy
		for i := range 100 {
			np := Policy("x", fmt.Sprintf("bulk-%d", i), Labels("pod", "b"))
			for j := range 100 {
				r := i*100 + j
				In(np, Peers(IPPeer(fmt.Sprintf("10.%d.%d.%d/32", 200+r/65536, (r/256)%256, r%256))), Port(tcp, int32(10000+r%5000)))
			}
			nps = append(nps, np)
		}
		last := nps[len(nps)-1]
		last.Spec.Ingress[99] = networkingv1.NetworkPolicyIngressRule{From: Peers(IPPeer(from.IP().String() + "/32"))}
		start := time.Now()
		for _, np := range nps {
			e.Apply(b, np)
		}
		created := time.Since(start)
		// Installed: at least two flows per rule, and the count settled.
		got, prev, settled := 0, -1, time.Time{}
		err := waitFor("netpol to hold 10,000 rules' flows on "+node, 5*time.Minute, func() error {
			got = flows() - base
			if got != prev {
				prev, settled = got, time.Now()
			}
			if got < 2*10000 || time.Since(settled) < time.Second {
				return fmt.Errorf("%d flows so far", got)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		install := settled.Sub(start)
		if err := probe.Check(from.NetNS, probe.TCP, to.IP(), 80, 2*time.Second); err != nil {
			b.Fatalf("x/a -> x/b not allowed by the 10,000th rule (%d flows): %v\n%s", got, err, e.agentLogs(30))
		}
		bps1, cps1 := measure()
		b.ReportMetric(install.Seconds(), "install-10k-s")
		b.ReportMetric(float64(got), "install-10k-flows")
		b.ReportMetric(bps0/1e9, "gbps-0rules")
		b.ReportMetric(bps1/1e9, "gbps-10k")
		b.ReportMetric(bps1/bps0, "gbps-ratio")
		b.ReportMetric(cps0, "conn/s-0rules")
		b.ReportMetric(cps1, "conn/s-10k")
		b.ReportMetric(cps1/cps0, "conn-ratio")
		b.Logf("10,000 rules: apiserver creates took %s, installed after %s, %d flows; throughput %.2f vs %.2f Gbit/s (%.2fx), %0.f vs %.0f conn/s (%.2fx)",
			created.Round(time.Millisecond), install.Round(time.Millisecond), got, bps1/1e9, bps0/1e9, bps1/bps0, cps1, cps0, cps1/cps0)
		// Back to no rule, so the next run starts where this one did.
		for _, np := range nps {
			if err := e.CP.Client.NetworkingV1().NetworkPolicies(np.Namespace).Delete(b.Context(), np.Name, metav1.DeleteOptions{}); err != nil {
				b.Fatalf("deleting %s/%s: %v", np.Namespace, np.Name, err)
			}
		}
		if err := waitFor("netpol to remove the 10,000 rules' flows on "+node, 2*time.Minute, func() error {
			if n := flows(); n > base {
				return fmt.Errorf("%d flows, %d before the rules", n, base)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
