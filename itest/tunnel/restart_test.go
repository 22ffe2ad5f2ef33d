package tunnel

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/testenv"
)

// kill -9 of the tunnel plugin on both ends of a cross-node TCP stream:
// the agent restarts it, the new incarnation re-installs its recorded peers
// before it says Synced, and the stream never stalls. No flow on either
// switch is touched (same cookie, duration running on), which is
// what "hitless" means here. The retransmits of the stream are reported
// next to those of the same stream without the kill; they are not
// asserted: on this shared 2-core machine two Go processes starting cost
// some (one second of two busy loops alone costs ~150 at load 13, a kill
// of podnet ~600), while the datapath itself does not change.
func TestKillTunnelDuringStream(t *testing.T) {
	testenv.LookPath(t, "iperf3", "iperf3")
	e := start(t, opts{nodes: 2})
	ps := e.pods(t, "k", e.c.Nodes)
	src, dst := ps[0], ps[1]
	const secs = 5
	// A paced stream: loss shows as retransmits, not as the datapath's
	// own drops at full speed.
	paced := []string{"-b", "50M", "-i", "0.5"}

	base := iperfRun(t, src.NetNS, dst.NetNS, dst.IP().String(), secs, paced...)

	iperfServe(dst.NetNS, dst.IP().String())
	c, err := startIperf(src.NetNS, dst.IP().String(), secs, paced...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { stopIperf(dst.NetNS) })
	time.Sleep(2 * time.Second)
	before := tunnelFlow(t, e.c.Nodes[0], e.c.Nodes[1].UnderlayIP)
	switchBefore := map[string]map[string]installed{}
	for _, n := range e.c.Nodes {
		switchBefore[n.Name] = allFlows(t, n)
	}
	for _, n := range e.c.Nodes {
		killPlugin(t, e, n)
	}
	r, err := c.wait()
	if err != nil {
		t.Fatalf("the stream did not survive the kill: %v", err)
	}
	for _, n := range e.c.Nodes {
		e.waitSynced(t, n)
		if _, _, restarts := e.plugin(t, n, "tunnel"); restarts < 1 {
			t.Errorf("%s: the agent reports %d restarts of tunnel after kill -9", n.Name, restarts)
		}
	}
	var per []string
	for i, iv := range r.Intervals {
		if iv.Sum.Bytes == 0 {
			t.Errorf("interval %d (from %.1fs) carried nothing: the stream stalled", i, iv.Sum.Start)
		}
		per = append(per, fmt.Sprintf("%.1fs:%d", iv.Sum.Start, iv.Sum.Retransmits))
	}
	t.Logf("retransmits per interval (kill at 2s): %s", strings.Join(per, " "))
	// Nothing on either switch was deleted or re-installed: every flow
	// that was there is there with its cookie, its duration running on.
	for _, n := range e.c.Nodes {
		now := allFlows(t, n)
		for k, b := range switchBefore[n.Name] {
			if a, ok := now[k]; !ok || a.cookie != b.cookie || a.duration < b.duration {
				t.Errorf("%s: flow %s was touched by the restart: before %+v, after %+v (present %v)", n.Name, k, b, a, ok)
			}
		}
	}
	after := tunnelFlow(t, e.c.Nodes[0], e.c.Nodes[1].UnderlayIP)
	if after.cookie != before.cookie || after.duration < before.duration || after.packets <= before.packets {
		t.Errorf("node-1's route to node-2's pods was touched by the restart: before %+v, after %+v", before, after)
	}
	t.Logf("retransmits: %d with kill -9 of tunnel on both nodes at 2s, %d in the same %ds stream without; sent %d and %d bytes",
		r.End.SumSent.Retransmits, base.End.SumSent.Retransmits, secs, r.End.SumSent.Bytes, base.End.SumSent.Bytes)
}

// killPlugin sends SIGKILL to the tunnel plugin process on n, by the pid
// the agent reports.
func killPlugin(t *testing.T, e *env, n *cluster.Node) {
	t.Helper()
	state, pid, _ := e.plugin(t, n, "tunnel")
	if pid <= 0 || state != "synced" {
		t.Fatalf("%s: tunnel is %s with pid %d", n.Name, state, pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("%s: kill -9 %d: %v", n.Name, pid, err)
	}
	err := testenv.Eventually(fmt.Sprintf("%s: a new tunnel process", n.Name), 20*time.Second, 50*time.Millisecond, func() error {
		if _, p, _ := e.plugin(t, n, "tunnel"); p == pid || p == 0 {
			return fmt.Errorf("still pid %d", p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
}

// installed is one flow as dump-flows shows it.
type installed struct {
	cookie   string
	duration float64
	packets  int64
}

var dumpRE = regexp.MustCompile(`cookie=(0x[0-9a-f]+), duration=([0-9.]+)s, .*n_packets=([0-9]+)`)

// tunnelFlow is n's routing flow towards peer.
func tunnelFlow(t *testing.T, n *cluster.Node, peer net.IP) installed {
	t.Helper()
	fs := peerFlows(t, n, peer)
	if len(fs) != 1 {
		t.Fatalf("%s: want one flow with tun_dst %s, have %q", n.Name, peer, fs)
	}
	m := dumpRE.FindStringSubmatch(fs[0])
	if m == nil {
		t.Fatalf("%s: cannot read %q", n.Name, fs[0])
	}
	d, _ := strconv.ParseFloat(m[2], 64)
	p, _ := strconv.ParseInt(m[3], 10, 64)
	return installed{cookie: m[1], duration: d, packets: p}
}

var keyRE = regexp.MustCompile(`table=([0-9]+), .*priority=([^ ]*)`)

// allFlows is every flow on n's br-int, by table and priority+match.
func allFlows(t *testing.T, n *cluster.Node) map[string]installed {
	t.Helper()
	out := map[string]installed{}
	for _, l := range strings.Split(n.OVS.Ofctl(t, "-O", "OpenFlow15", "dump-flows", "br-int"), "\n") {
		m, k := dumpRE.FindStringSubmatch(l), keyRE.FindStringSubmatch(l)
		if m == nil || k == nil {
			continue
		}
		d, _ := strconv.ParseFloat(m[2], 64)
		p, _ := strconv.ParseInt(m[3], 10, 64)
		out["table="+k[1]+" priority="+k[2]] = installed{cookie: m[1], duration: d, packets: p}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no flows read from br-int", n.Name)
	}
	return out
}
