package ovs_test

import (
	"strings"
	"testing"

	"switchyard.dev/switchyard/itest/ovs"
)

func TestSwitchLifecycle(t *testing.T) {
	sw := ovs.Start(t, ovs.Options{Name: "life"})
	sw.AddBridge(t, "br-int")

	if got := strings.TrimSpace(sw.Vsctl(t, "get", "bridge", "br-int", "datapath_type")); got != "netdev" {
		t.Fatalf("datapath_type = %q, want netdev", got)
	}
	sw.Ofctl(t, "add-flow", "br-int", "table=0,priority=10,ip,actions=drop")
	if out := sw.Ofctl(t, "dump-flows", "br-int"); !strings.Contains(out, "priority=10,ip actions=drop") {
		t.Fatalf("flow not installed; dump-flows:\n%s", out)
	}

	oldPid := sw.VswitchdPid()
	sw.KillVswitchd(t)
	sw.StartVswitchd(t)
	if sw.VswitchdPid() == oldPid {
		t.Fatalf("ovs-vswitchd pid unchanged after restart")
	}
	// A restarted ovs-vswitchd rebuilds bridges from OVSDB but not flows.
	sw.AddBridgeWait(t, "br-int")
	if out := sw.Ofctl(t, "dump-flows", "br-int"); strings.Contains(out, "priority=10") {
		t.Fatalf("flows survived a vswitchd restart, want empty table:\n%s", out)
	}
}
