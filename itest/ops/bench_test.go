package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/host/agent"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/testenv"
)

// post sends a trace request to an agent's API socket.
func post(sock string, req agent.TraceRequest) (*agent.TraceResult, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	b, _ := json.Marshal(req)
	resp, err := c.Post("http://agent/v1/trace", "application/json", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r agent.TraceResult
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("trace: HTTP %d", resp.StatusCode)
	}
	return &r, json.NewDecoder(resp.Body).Decode(&r)
}

// BenchmarkTrace measures a trace's answer time on one node (pod to pod)
// and across nodes (the sending node's trace, then the receiving node's
// from the tunnel request it returned), computed only and confirmed with
// an injected packet, against the baseline of `ovs-ofctl dump-flows
// br-int` on the same switch: the dump a trace is built on, as an operator
// would read it by hand. Run with -benchtime=20x -count=N and take the
// medians.
func BenchmarkTrace(b *testing.B) {
	testenv.RequireRoot(b)
	e := start(b)
	n1, n2 := e.c.Nodes[0], e.c.Nodes[1]
	a1 := e.c.AddPod(b, cluster.PodSpec{Name: "a-1", Namespace: "bench", Node: n1})
	b1 := e.c.AddPod(b, cluster.PodSpec{Name: "b-1", Namespace: "bench", Node: n1})
	a2 := e.c.AddPod(b, cluster.PodSpec{Name: "a-2", Namespace: "bench", Node: n2})
	s1, s2 := e.agents[n1.Name].APISocket, e.agents[n2.Name].APISocket
	var same, sameInj, cross, crossInj, dump, tfSame, tfCross time.Duration
	nTF := 0
	timed := func(inject bool, first agent.TraceRequest, want string) time.Duration {
		t0 := time.Now()
		first.Inject = inject
		r, err := post(s1, first)
		if err != nil {
			b.Fatalf("trace: %v", err)
		}
		if v := r.Verdicts[0]; v.Next != nil {
			next := *v.Next
			next.Inject = inject
			if r, err = post(s2, next); err != nil {
				b.Fatalf("trace, second node: %v", err)
			}
		}
		if r.Verdicts[0].Kind != want || (inject && (r.Datapath == nil || !r.Datapath.Confirmed)) {
			b.Fatalf("trace: %+v %+v", r.Verdicts, r.Datapath)
		}
		return time.Since(t0)
	}
	sameReq := agent.TraceRequest{SourcePod: a1.Key(), DstIP: b1.IP().String(), DstPort: 80}
	crossReq := agent.TraceRequest{SourcePod: a1.Key(), DstIP: a2.IP().String(), DstPort: 80}
	b.ResetTimer()
	for range b.N {
		same += timed(false, sameReq, agent.VerdictDelivered)
		sameInj += timed(true, sameReq, agent.VerdictDelivered)
		cross += timed(false, crossReq, agent.VerdictDelivered)
		crossInj += timed(true, crossReq, agent.VerdictDelivered)
		t0 := time.Now()
		n1.OVS.Ofctl(b, "dump-flows", "br-int")
		dump += time.Since(t0)
		// The same traces as Traceflow objects: through the apiserver,
		// each node's agent doing its part from the object (polled
		// every 5 ms).
		for _, c := range []struct {
			dst string
			sum *time.Duration
		}{{"bench/b-1", &tfSame}, {"bench/a-2", &tfCross}} {
			nTF++
			tf, took := e.runTraceflow(b, fmt.Sprintf("bench-%d", nTF), crdv1.TraceflowSpec{Source: a1.Key(), DestinationPod: c.dst, Protocol: "tcp", Port: 80})
			if tf.Status.Outcome != agent.VerdictDelivered {
				b.Fatalf("Traceflow to %s: %+v", c.dst, tf.Status)
			}
			*c.sum += took
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(same), "same-ms")
	b.ReportMetric(ms(sameInj), "same-injected-ms")
	b.ReportMetric(ms(cross), "cross-ms")
	b.ReportMetric(ms(crossInj), "cross-injected-ms")
	b.ReportMetric(ms(dump), "ofctl-dump-ms")
	b.ReportMetric(float64(same)/float64(dump), "same/dump")
	b.ReportMetric(float64(sameInj)/float64(dump), "same-injected/dump")
	b.ReportMetric(float64(crossInj)/float64(dump), "cross-injected/dump")
	b.ReportMetric(ms(tfSame), "traceflow-same-ms")
	b.ReportMetric(ms(tfCross), "traceflow-cross-ms")
	b.ReportMetric(float64(tfSame)/float64(dump), "traceflow-same/dump")
	b.ReportMetric(float64(tfCross)/float64(dump), "traceflow-cross/dump")
}

// cpuTicks is a process's user+system CPU time in 10 ms clock ticks.
func cpuTicks(b *testing.B, pid int) int64 {
	d, err := testenv.ProcCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return int64(d / (10 * time.Millisecond))
}

// BenchmarkIdleCPU measures the CPU an idle agent spends per minute when
// Prometheus scrapes /metrics and an operator's status probe reads
// /v1/plugins every 15 s, against the same agent left alone for the same
// window (the baseline), in one run. /proc/<pid>/stat ticks are 10 ms, so
// the window is 60 s. Run with -benchtime=1x -count=N.
func BenchmarkIdleCPU(b *testing.B) {
	testenv.RequireRoot(b)
	e := start(b)
	n1 := e.c.Nodes[0]
	e.c.AddPod(b, cluster.PodSpec{Name: "a-1", Namespace: "bench", Node: n1})
	a := e.agents[n1.Name]
	pid := a.Process.Pid()
	const window = 60 * time.Second
	time.Sleep(5 * time.Second) // settle after the pod
	b.ResetTimer()
	var quiet, scraped int64
	for range b.N {
		c0 := cpuTicks(b, pid)
		time.Sleep(window)
		c1 := cpuTicks(b, pid)
		for range int(window / (15 * time.Second)) {
			if code, _, err := a.Get("/metrics"); err != nil || code != 200 {
				b.Fatalf("scrape: %d %v", code, err)
			}
			if code, _, err := a.Get("/v1/plugins"); err != nil || code != 200 {
				b.Fatalf("status: %d %v", code, err)
			}
			time.Sleep(15 * time.Second)
		}
		c2 := cpuTicks(b, pid)
		quiet, scraped = quiet+(c1-c0), scraped+(c2-c1)
	}
	b.StopTimer()
	n := float64(b.N)
	tick := 10.0 // ms per tick (USER_HZ 100)
	b.ReportMetric(float64(quiet)*tick/n, "idle-cpu-ms/min")
	b.ReportMetric(float64(scraped)*tick/n, "scraped-cpu-ms/min")
	b.ReportMetric(float64(scraped-quiet)*tick/n, "status+metrics-cpu-ms/min")
}
