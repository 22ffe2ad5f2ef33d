package tunnel

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/probe"
)

// Creating and deleting links on a node (what every CNI ADD and DEL and
// the warm-port pool do) loses no packet of other pods' cross-node
// traffic. An ovs-vswitchd that reads the kernel's routes rereads them on
// every link event and forgets for that moment that the node IP ends
// tunnels (a packet arriving then is lost: 0.2-0.3 % of them under this
// churn); the agent gives it the underlay routes instead (ovs-appctl
// ovs/route/show as witness), and gives them again to an ovs-vswitchd
// that restarted, after having the kernel resolve the peers' MACs again
// so that the first packet to each is not dropped.
func TestCrossNodeTrafficSurvivesLinkChurn(t *testing.T) {
	e := start(t, opts{nodes: 2})
	ps := e.pods(t, "c", e.c.Nodes)
	n1, n2 := e.c.Nodes[0], e.c.Nodes[1]
	for _, n := range e.c.Nodes {
		waitUserRoute(t, n)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var churned [2]int
	for i, n := range []*cluster.Node{n1, n2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("sychurn%d", k%4)
				if _, err := n.Exec("ip", "link", "add", name, "type", "veth", "peer", "name", name+"p"); err != nil {
					t.Errorf("churn on %s: %v", n.Name, err)
					return
				}
				_, _ = n.Exec("ip", "link", "set", name, "up")
				if _, err := n.Exec("ip", "link", "del", name); err != nil {
					t.Errorf("churn on %s: %v", n.Name, err)
					return
				}
				churned[i]++
			}
		}()
	}
	// 2000 echo requests over ~6 s, each a new ICMP flow id per batch of
	// ping processes so that some need a fresh upcall.
	lost, sent := 0, 0
	for batch := 0; batch < 10; batch++ {
		out, _ := n1.Exec("ip", "netns", "exec", ps[0].NetNS, "ping", "-n", "-q", "-i", "0.003", "-c", "200", "-W", "1", ps[1].IP().String())
		tx, rx := pingCounts(t, out)
		sent += tx
		lost += tx - rx
	}
	close(stop)
	wg.Wait()
	t.Logf("%d of %d echo requests lost while %d and %d veth pairs came and went on the two nodes", lost, sent, churned[0], churned[1])
	if churned[0] < 20 || churned[1] < 20 {
		t.Fatalf("too little churn to test anything: %v", churned)
	}
	// With ovs-vswitchd reading the kernel's routes, 12 of 2,000 were lost
	// here on an idle machine; with the mirror none idle, and once 1 under
	// CI load (tests of other packages running beside), a loss not tied to
	// the churn. The bound keeps that apart from the bug, 4 times below it.
	if lost > maxChurnLoss {
		t.Errorf("%d of %d echo requests across the tunnel lost during link churn, want at most %d", lost, sent, maxChurnLoss)
	}

	// A route through br-phy that comes and goes (an Egress IP's, a second
	// subnet's) is mirrored, and removing it from ovs-vswitchd, which makes
	// it forget br-phy's tunnel endpoints, does not cut the tunnel.
	v4 := podEndpoints(ps, false)
	const extra = "198.19.0.0/24"
	if _, err := n2.Exec("ip", "addr", "add", "198.19.0.2/24", "dev", "br-phy"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, n2, "User: "+extra+" dev br-phy", true)
	if _, err := n2.Exec("ip", "addr", "del", "198.19.0.2/24", "dev", "br-phy"); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, n2, "User: "+extra+" dev br-phy", false)
	matrix(t, v4, v4, true, probe.ICMP, probe.TCP)

	// A restarted ovs-vswitchd knows no route and no peer MAC until the
	// agent gives them again: under a 100 packets/s ping across the tunnel
	// the loss lasts no longer than ovs-vswitchd is down (kill until its
	// bridge socket is back) plus 200 ms, as on a single node
	// (itest/host TestVswitchdRestartOutage).
	type result struct {
		out     string
		elapsed time.Duration
	}
	done := make(chan result, 1)
	began := time.Now()
	go func() {
		out, _ := n1.Exec("ip", "netns", "exec", ps[0].NetNS, "ping", "-n", "-q", "-i", "0.01", "-c", "400", "-W", "1", ps[1].IP().String())
		done <- result{out, time.Since(began)}
	}()
	time.Sleep(time.Second)
	killed := time.Now()
	n2.OVS.KillVswitchd(t)
	n2.OVS.StartVswitchd(t)
	n2.OVS.AddBridgeWait(t, "br-int")
	down := time.Since(killed)
	r := <-done
	tx, rx := pingCounts(t, r.out)
	every := r.elapsed / time.Duration(tx)
	outage := time.Duration(tx-rx) * every
	t.Logf("ovs-vswitchd on %s down %v; %d of %d pings across the tunnel lost (~%v at one per %v)",
		n2.Name, down.Round(time.Millisecond), tx-rx, tx, outage.Round(time.Millisecond), every.Round(time.Microsecond))
	if outage > down+200*time.Millisecond {
		t.Errorf("pings lost for ~%v, ovs-vswitchd was down %v: tunnel forwarding took more than 200 ms to come back", outage.Round(time.Millisecond), down.Round(time.Millisecond))
	}
	waitUserRoute(t, n2)
	matrix(t, v4, v4, true, probe.ICMP, probe.TCP)
}

// waitRoute waits until n's ovs-vswitchd's routing table has (or, with
// present false, no longer has) the line want.
func waitRoute(t *testing.T, n *cluster.Node, want string, present bool) {
	t.Helper()
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out = n.OVS.Appctl(t, "ovs/route/show"); strings.Contains(out, want) == present {
			return
		}
	}
	t.Fatalf("%s: ovs-vswitchd's routes never came to %s %q:\n%s", n.Name, map[bool]string{true: "hold", false: "lack"}[present], want, out)
}

// waitUserRoute waits until n's ovs-vswitchd holds, as a route it was
// given, the underlay subnet through br-phy, and no route it read from the
// kernel (it runs with --disable-system-route).
func waitUserRoute(t *testing.T, n *cluster.Node) {
	t.Helper()
	want := "User: " + cluster.UnderlayCIDR + " dev br-phy"
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out = n.OVS.Appctl(t, "ovs/route/show")
		if strings.Contains(out, want) {
			if strings.Contains(out, "Cached:") {
				t.Fatalf("%s: ovs-vswitchd learned routes from the kernel:\n%s", n.Name, out)
			}
			return
		}
	}
	t.Fatalf("%s: ovs-vswitchd never got %q:\n%s", n.Name, want, out)
}

// maxChurnLoss bounds the echo requests TestCrossNodeTrafficSurvivesLinkChurn
// may lose of its 2,000 (0.15 %).
const maxChurnLoss = 3

var pingSummary = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

func pingCounts(t *testing.T, out string) (tx, rx int) {
	t.Helper()
	m := pingSummary.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no ping summary in:\n%s", out)
	}
	tx, _ = strconv.Atoi(m[1])
	rx, _ = strconv.Atoi(m[2])
	return tx, rx
}
