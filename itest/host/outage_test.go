package host

import (
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/testenv"
)

// TestVswitchdRestartOutage kills ovs-vswitchd under a 100 packets/s ping
// between two pods and starts it again. The agent reconnects as soon as
// the bridge's socket is back and replays every flow at once, so the pings
// lost cover no more than the time ovs-vswitchd was down (kill until its
// bridge socket accepts connections again) plus 200 ms.
func TestVswitchdRestartOutage(t *testing.T) {
	testenv.RequireRoot(t)
	n := newNode(t)
	n.writeConfig(n.alpha())
	n.startAgent("alpha")
	n.waitPing("ping before the restart", 0, 1)

	ping := n.pingAsync(0, 1, "0.01")
	began := time.Now()
	time.Sleep(time.Second)
	killed := time.Now()
	n.sw.KillVswitchd(t)
	n.sw.StartVswitchd(t)
	n.sw.AddBridgeWait(t, "br-int")
	down := time.Since(killed)
	time.Sleep(2 * time.Second)
	tx, rx, out := ping.stop()
	if tx == 0 {
		t.Fatalf("ping sent nothing: %s", out)
	}
	// The effective interval, as ping really paced itself on this machine.
	every := time.Since(began) / time.Duration(tx)
	lost := time.Duration(tx-rx) * every
	t.Logf("ovs-vswitchd down %v; %d of %d pings lost (~%v at one per %v)", down.Round(time.Millisecond), tx-rx, tx, lost.Round(time.Millisecond), every.Round(time.Microsecond))
	if lost > down+200*time.Millisecond {
		t.Errorf("pings lost for ~%v, ovs-vswitchd was down %v: the agent took more than 200 ms to restore forwarding\nagent log:\n%s",
			lost.Round(time.Millisecond), down.Round(time.Millisecond), n.agent.Tail(20))
	}
}
