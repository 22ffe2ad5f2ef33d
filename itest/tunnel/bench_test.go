package tunnel

import (
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

// path is one of the three things BenchmarkCrossNode compares.
type path struct {
	name            string
	srcNS, dstNS    string
	dstIP           string
	node            *cluster.Node // whose ovs-vswitchd's cycles are read
	gbps, connsPerS float64
	cpuNsPerPkt     float64
	retrans         int
}

// BenchmarkCrossNode measures, in one run on one 2-node cluster (podnet +
// Geneve tunnel), TCP throughput (one iperf3 stream) and TCP connection
// rate (connect, 1-byte request and echo, close, back to back) for
// same-node pod-to-pod (the baseline), cross-node pod-to-pod, and the raw
// underlay between the two node namespaces (over br-phy, without the
// overlay). The paths are measured one after another in an order that
// rotates per iteration, and the ratios are reported beside the figures.
// cpu-ns/pkt is the per-packet CPU cost of the userspace datapath on the
// sending node during the throughput run: the CPU time ovs-vswitchd used
// (all its threads, /proc/<pid>/stat) over the packets its datapath
// received (ovs-appctl dpif-netdev/pmd-stats-show, cleared before the
// run). OVS 3.1 reports cycles per packet only for PMD threads, and
// without DPDK there are none: the main thread polls the ports. Run with
// -benchtime=1x -count=N and take the medians.
func BenchmarkCrossNode(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.LookPath(b, "iperf3", "iperf3")
	e := start(b, opts{nodes: 2})
	n1, n2 := e.c.Nodes[0], e.c.Nodes[1]
	a1 := e.c.AddPod(b, cluster.PodSpec{Name: "a-1", Namespace: "bench", Node: n1})
	b1 := e.c.AddPod(b, cluster.PodSpec{Name: "b-1", Namespace: "bench", Node: n1})
	a2 := e.c.AddPod(b, cluster.PodSpec{Name: "a-2", Namespace: "bench", Node: n2})
	for _, ns := range []string{b1.NetNS, a2.NetNS, n2.NetNS} {
		probe.Serve(b, ns, port)
	}
	paths := []*path{
		{name: "same", srcNS: a1.NetNS, dstNS: b1.NetNS, dstIP: b1.IP().String(), node: n1},
		{name: "cross", srcNS: a1.NetNS, dstNS: a2.NetNS, dstIP: a2.IP().String(), node: n1},
		{name: "underlay", srcNS: n1.NetNS, dstNS: n2.NetNS, dstIP: n2.UnderlayIP.String(), node: n1},
	}
	const secs = 3
	b.ResetTimer()
	for i := range b.N {
		for j := range paths {
			p := paths[(i+j)%len(paths)]
			p.node.OVS.Appctl(b, "dpif-netdev/pmd-stats-clear")
			cpu0 := cpuTime(b, p.node)
			r := iperfRun(b, p.srcNS, p.dstNS, p.dstIP, secs)
			cpu := cpuTime(b, p.node) - cpu0
			p.gbps, p.retrans = r.End.SumSent.BitsPerSecond/1e9, r.End.SumSent.Retransmits
			if pkts := packetsReceived(b, p.node); pkts > 0 {
				p.cpuNsPerPkt = float64(cpu.Nanoseconds()) / float64(pkts)
			}
			p.connsPerS = connRate(b, p.srcNS, p.dstIP, 2*time.Second)
		}
	}
	b.StopTimer()
	same, cross, under := paths[0], paths[1], paths[2]
	for _, p := range paths {
		b.ReportMetric(p.gbps, p.name+"-Gbit/s")
		b.ReportMetric(p.connsPerS, p.name+"-conn/s")
		b.ReportMetric(float64(p.retrans), p.name+"-retrans")
		if p.cpuNsPerPkt > 0 {
			b.ReportMetric(p.cpuNsPerPkt, p.name+"-cpu-ns/pkt")
		}
	}
	b.ReportMetric(cross.gbps/same.gbps, "cross/same-tput")
	b.ReportMetric(cross.connsPerS/same.connsPerS, "cross/same-conn")
	b.ReportMetric(cross.gbps/under.gbps, "cross/underlay-tput")
	b.ReportMetric(cross.connsPerS/under.connsPerS, "cross/underlay-conn")
	b.ReportMetric(0, "ns/op")
}

// connRate opens TCP connections to ip:port from ns back to back for d,
// each carrying one byte there and back, and returns connections per
// second.
func connRate(b *testing.B, ns, ip string, d time.Duration) float64 {
	b.Helper()
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	n := 0
	var took time.Duration
	err := netns.Do(ns, func() error {
		buf := make([]byte, 1)
		start := time.Now()
		for time.Since(start) < d {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return err
			}
			c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Write([]byte{'x'}); err != nil {
				c.Close()
				return err
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				c.Close()
				return err
			}
			c.Close()
			n++
		}
		took = time.Since(start)
		return nil
	})
	if err != nil {
		b.Fatalf("connection rate to %s from %s: %v after %d connections", addr, ns, err, n)
	}
	return float64(n) / took.Seconds()
}

// cpuTime is the CPU time ovs-vswitchd on n has used so far (user and
// system, every thread), from /proc/<pid>/stat in clock ticks of 10ms.
func cpuTime(b *testing.B, n *cluster.Node) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.OVS.VswitchdPid()))
	if err != nil {
		b.Fatalf("%s: ovs-vswitchd stat: %v", n.Name, err)
	}
	// Fields after the command name (which may hold spaces) start at 3.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

var receivedRE = regexp.MustCompile(`packets received:\s*([0-9]+)`)

// packetsReceived sums the packets every datapath thread of n received
// since the last pmd-stats-clear.
func packetsReceived(b *testing.B, n *cluster.Node) int64 {
	b.Helper()
	var sum int64
	for _, m := range receivedRE.FindAllStringSubmatch(n.OVS.Appctl(b, "dpif-netdev/pmd-stats-show"), -1) {
		v, _ := strconv.ParseInt(m[1], 10, 64)
		sum += v
	}
	return sum
}
