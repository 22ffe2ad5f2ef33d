package tunnel

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/testenv"
)

// kill -9 of the tunnel plugin on both ends of a cross-node TCP stream:
// the agent restarts it, the new incarnation re-installs its recorded peers
// before it says Synced, and the stream never stalls. The retransmits of
// the stream are reported next to those of the same stream without the
// kill (expected: no more).
func TestKillTunnelDuringStream(t *testing.T) {
	e := start(t, opts{nodes: 2})
	ps := e.pods(t, "k", e.c.Nodes)
	src, dst := ps[0], ps[1]
	const secs = 6
	// A paced stream: loss shows as retransmits, not as the datapath's
	// own drops at full speed.
	paced := []string{"-b", "200M", "-i", "0.5"}

	base := iperfRun(t, src.NetNS, dst.NetNS, dst.IP().String(), secs, paced...)

	iperfServe(dst.NetNS, dst.IP().String())
	c, err := startIperf(src.NetNS, dst.IP().String(), secs, paced...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { stopIperf(dst.NetNS) })
	time.Sleep(2 * time.Second)
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
	for i, iv := range r.Intervals {
		if iv.Sum.Bytes == 0 {
			t.Errorf("interval %d (from %.1fs) carried nothing: the stream stalled", i, iv.Sum.Start)
		}
	}
	if len(peerFlows(t, e.c.Nodes[0], e.c.Nodes[1].UnderlayIP)) != 1 {
		t.Errorf("node-1 lost its route to node-2's pods across the restart")
	}
	t.Logf("retransmits: %d with kill -9 of tunnel on both nodes at 2s, %d in the same %ds stream without; sent %d and %d bytes",
		r.End.SumSent.Retransmits, base.End.SumSent.Retransmits, secs, r.End.SumSent.Bytes, base.End.SumSent.Bytes)
	if extra := r.End.SumSent.Retransmits - base.End.SumSent.Retransmits; extra > 50 {
		t.Errorf("retransmit storm: %d retransmits more than without the kill", extra)
	}
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
