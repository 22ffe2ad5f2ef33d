package ovs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/ovs"
	"switchyard.dev/switchyard/itest/testenv"
)

// segment is two "pods" (namespaces with an eth0) and a node end (the
// gateway: an OVS internal port, or the Linux bridge itself) on one L2
// segment, 10.99.0.0/24.
type segment struct {
	node, a, b string // namespaces
	gwIP       string // the node end's address
}

const (
	ipA, ipB, ipGW = "10.99.0.1", "10.99.0.2", "10.99.0.254"
)

func must(t testing.TB, ns string, args ...string) {
	t.Helper()
	if out, err := netns.Exec(ns, args...); err != nil {
		t.Fatalf("%s in %s: %v\n%s", strings.Join(args, " "), ns, err, out)
	}
}

// pods creates the two pod namespaces with a veth each into node, with
// transmit checksum offload on or off on the pod end.
func pods(t testing.TB, node, tag string, txCsum bool) (a, b string, hostIfs []string) {
	t.Helper()
	a, b = netns.Create(t, testenv.Name(tag+"a")), netns.Create(t, testenv.Name(tag+"b"))
	for i, p := range []string{a, b} {
		h := fmt.Sprintf("vh%s%d", tag, i)
		must(t, node, "ip", "link", "add", h, "type", "veth", "peer", "name", "eth0", "netns", p)
		must(t, node, "ip", "link", "set", h, "up")
		must(t, p, "ip", "link", "set", "eth0", "up")
		must(t, p, "ip", "addr", "add", []string{ipA, ipB}[i]+"/24", "dev", "eth0")
		tx := "off"
		if txCsum {
			tx = "on"
		}
		must(t, p, "ethtool", "-K", "eth0", "tx", tx)
		hostIfs = append(hostIfs, h)
	}
	return a, b, hostIfs
}

// ovsSegment is br-int on a netdev bridge, set up the way the agent sets it
// up (host/ovsdb: userspace TSO first when asked, then the bridge and the
// ports), switching with NORMAL.
func ovsSegment(t testing.TB, tag string, tso, txCsum bool) segment {
	t.Helper()
	testenv.LookPath(t, "ethtool", "ethtool")
	sw := ovs.Start(t, ovs.Options{Name: "dp" + tag})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := ovsdb.Dial(ctx, sw.DBSock, "br-int", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if tso {
		if err := db.EnableUserspaceTSO(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.EnsureBridge(ctx, "netdev"); err != nil {
		t.Fatal(err)
	}
	a, b, hostIfs := pods(t, sw.NetNS, tag, txCsum)
	for _, h := range append(hostIfs, "gw0") {
		spec := ovsdb.PortSpec{Name: h, Owner: "itest"}
		if h == "gw0" {
			spec.Type = "internal"
		}
		if err := db.CreatePort(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if _, err := db.WaitOFPort(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	must(t, sw.NetNS, "ip", "addr", "add", ipGW+"/24", "dev", "gw0")
	must(t, sw.NetNS, "ip", "link", "set", "gw0", "up")
	sw.Ofctl(t, "add-flow", "br-int", "actions=NORMAL")
	return segment{node: sw.NetNS, a: a, b: b, gwIP: ipGW}
}

// bridgeSegment is the baseline: a Linux bridge between the same kind of
// namespaces, with the kernel's default offloads.
func bridgeSegment(t testing.TB, tag string) segment {
	t.Helper()
	node := netns.Create(t, testenv.Name(tag+"n"))
	must(t, node, "ip", "link", "add", "br0", "type", "bridge")
	a, b, hostIfs := pods(t, node, tag, true)
	for _, h := range hostIfs {
		must(t, node, "ip", "link", "set", h, "master", "br0")
	}
	must(t, node, "ip", "addr", "add", ipGW+"/24", "dev", "br0")
	must(t, node, "ip", "link", "set", "br0", "up")
	return segment{node: node, a: a, b: b, gwIP: ipGW}
}

// csumErrors is the sum of Tcp and Udp InCsumErrors in ns (/proc/net/snmp
// is per namespace).
func csumErrors(t testing.TB, ns string) int {
	t.Helper()
	out, err := netns.Exec(ns, "cat", "/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	lines := strings.Split(out, "\n")
	for i := 0; i+1 < len(lines); i++ {
		h, v := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(h) == 0 || len(h) != len(v) || (h[0] != "Tcp:" && h[0] != "Udp:") || h[0] != v[0] {
			continue
		}
		for j := range h {
			if h[j] == "InCsumErrors" {
				n, _ := strconv.Atoi(v[j])
				total += n
			}
		}
		i++
	}
	return total
}

// tcpTransfer sends n random bytes from ns `from` to addr (served in ns
// `to`) and reports whether they arrived intact.
func tcpTransfer(t testing.TB, from, to, addr string, n int) error {
	t.Helper()
	l, err := netns.Listen(to, "tcp", addr)
	if err != nil {
		return err
	}
	defer l.Close()
	got := make(chan [32]byte, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(got)
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second))
		h := sha256.New()
		io.Copy(h, c)
		var s [32]byte
		copy(s[:], h.Sum(nil))
		got <- s
	}()
	data := make([]byte, n)
	rand.Read(data)
	c, err := netns.Dial(from, "tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write(data); err != nil {
		c.Close()
		return fmt.Errorf("write: %w", err)
	}
	c.Close()
	sum, ok := <-got
	if !ok || sum != sha256.Sum256(data) {
		return fmt.Errorf("%d bytes %s -> %s arrived altered or not at all", n, from, addr)
	}
	return nil
}

// udpTransfer sends count datagrams of size bytes and returns how many
// arrived with their content intact.
func udpTransfer(t testing.TB, from, to, addr string, count, size int) int {
	t.Helper()
	pc, err := netns.ListenPacket(to, "udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c, err := netns.Dial(from, "udp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	payload := bytes.Repeat([]byte{0xa5, 0x5a, 0x0f}, size/3)
	for range count {
		c.Write(payload)
		time.Sleep(200 * time.Microsecond) // pace: this counts checksums, not socket buffers
	}
	ok := 0
	buf := make([]byte, 65536)
	for {
		pc.SetReadDeadline(time.Now().Add(time.Second))
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			return ok
		}
		if bytes.Equal(buf[:n], payload) {
			ok++
		}
	}
}

// TestUserspaceTSOKeepsChecksums: with userspace TSO on (as the agent sets
// it on a netdev bridge) pods may keep transmit checksum offload: TCP and
// UDP between pods, from a pod to the node and from the node to a pod
// arrive intact, with no checksum error counted by any receiver. Without
// userspace TSO the same offload corrupts UDP checksums, which shows the
// witness can see the fault podnet once had to turn offload off for.
func TestUserspaceTSOKeepsChecksums(t *testing.T) {
	testenv.RequireRoot(t)
	t.Run("tso on, offload on", func(t *testing.T) {
		s := ovsSegment(t, "c", true, true)
		for _, p := range []struct{ name, from, to, addr string }{
			{"pod to pod", s.a, s.b, ipB + ":5001"},
			{"pod to node", s.a, s.node, ipGW + ":5002"},
			{"node to pod", s.node, s.b, ipB + ":5003"},
		} {
			before := csumErrors(t, p.to)
			if err := tcpTransfer(t, p.from, p.to, p.addr, 16<<20); err != nil {
				t.Errorf("%s TCP: %v", p.name, err)
			}
			if n := udpTransfer(t, p.from, p.to, p.addr, 200, 1200); n == 0 {
				t.Errorf("%s UDP: none of 200 datagrams arrived intact", p.name)
			}
			if d := csumErrors(t, p.to) - before; d != 0 {
				t.Errorf("%s: receiver counted %d checksum errors", p.name, d)
			}
		}
	})
	t.Run("tso off, offload on: the fault is visible", func(t *testing.T) {
		s := ovsSegment(t, "d", false, true)
		before := csumErrors(t, s.b)
		n := udpTransfer(t, s.a, s.b, ipB+":5004", 50, 1200)
		if d := csumErrors(t, s.b) - before; d == 0 || n != 0 {
			t.Errorf("without userspace TSO, offloaded UDP got through (%d/50 intact, %d checksum errors): the witness would not see the fault", n, d)
		}
	})
}

// iperf runs one iperf3 TCP stream for secs seconds from a to b and returns
// Gbit/s and retransmits.
func iperf(b *testing.B, s segment, secs int) (float64, int) {
	b.Helper()
	type result struct {
		Error string `json:"error"`
		End   struct {
			SumSent struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Retransmits   int     `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	// One server per run (-1); it needs a moment to listen, and a run that
	// did not happen (iperf3 reports an error, e.g. refused) is retried.
	var last string
	for range 50 {
		netns.Exec(s.b, "iperf3", "-s", "-1", "-D", "-B", ipB)
		time.Sleep(100 * time.Millisecond)
		out, err := netns.Exec(s.a, "iperf3", "-c", ipB, "-t", strconv.Itoa(secs), "-J")
		var r result
		if jerr := json.Unmarshal([]byte(out), &r); err == nil && jerr == nil && r.Error == "" && r.End.SumSent.BitsPerSecond > 0 {
			return r.End.SumSent.BitsPerSecond / 1e9, r.End.SumSent.Retransmits
		}
		last = fmt.Sprintf("%v %s", err, out)
		stopIperfServer(s.b) // one left from the failed run
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("iperf3 %s -> %s never completed a run; last: %s", s.a, ipB, last)
	return 0, 0
}

// stopIperfServer kills the iperf3 processes inside namespace ns (by pid,
// from `ip netns pids`: other iperf3 runs on the machine are left alone).
func stopIperfServer(ns string) {
	out, err := testenv.Run("ip", "netns", "pids", ns)
	if err != nil {
		return
	}
	for _, pid := range strings.Fields(out) {
		if comm, err := os.ReadFile("/proc/" + pid + "/comm"); err == nil && strings.TrimSpace(string(comm)) == "iperf3" {
			testenv.Run("kill", pid)
		}
	}
}

// connRate opens, uses (one byte each way) and closes TCP connections from
// a to b for d and returns connections per second.
func connRate(b *testing.B, s segment, d time.Duration) float64 {
	b.Helper()
	l, err := netns.Listen(s.b, "tcp", ipB+":5201")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var one [1]byte
				if _, err := io.ReadFull(c, one[:]); err == nil {
					c.Write(one[:])
				}
			}()
		}
	}()
	n := 0
	start := time.Now()
	err = netns.Do(s.a, func() error {
		var one [1]byte
		for time.Since(start) < d {
			c, err := net.DialTimeout("tcp", ipB+":5201", 5*time.Second)
			if err != nil {
				return err
			}
			c.Write(one[:])
			_, err = io.ReadFull(c, one[:])
			c.Close()
			if err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkPodToPod: same-node pod-to-pod TCP through an OVS netdev bridge
// set up as the agent sets it up (userspace TSO on, pods' checksum offload
// on), against a Linux bridge between the same kind of namespaces, in the
// same run and back to back: one iperf3 stream's throughput and
// retransmits, and the rate of short connections. Also measured: the
// netdev bridge as podnet ran it before (no TSO, offload off in the pods).
func BenchmarkPodToPod(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.LookPath(b, "iperf3", "iperf3")
	segs := map[string]segment{
		"ovs":    ovsSegment(b, "o", true, true),
		"ovsold": ovsSegment(b, "p", false, false),
		"bridge": bridgeSegment(b, "l"),
	}
	const secs = 5
	gbps, retr, conns := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for range b.N {
		for _, k := range []string{"bridge", "ovs", "ovsold"} {
			g, r := iperf(b, segs[k], secs)
			gbps[k] += g
			retr[k] += float64(r)
			conns[k] += connRate(b, segs[k], 2*time.Second)
		}
	}
	n := float64(b.N)
	for _, k := range []string{"bridge", "ovs", "ovsold"} {
		b.ReportMetric(gbps[k]/n, k+"-Gbit/s")
		b.ReportMetric(retr[k]/n, k+"-retrans")
		b.ReportMetric(conns[k]/n, k+"-conn/s")
	}
	b.ReportMetric(gbps["ovs"]/gbps["bridge"], "ovs/bridge-Gbit/s")
	b.ReportMetric(conns["ovs"]/conns["bridge"], "ovs/bridge-conn/s")
	b.ReportMetric((retr["ovs"]+1)/(retr["bridge"]+1), "ovs/bridge-retrans")
	b.ReportMetric(0, "ns/op")
}
