package cni

import (
	"strings"
	"testing"

	"switchyard.dev/switchyard/itest/cluster"
)

// TestCheckFailsAfterFlowDeleted: podnet's CHECK reads the pod's flows
// back from the switch, so a flow deleted out of band (ovs-ofctl, the
// independent witness) makes CHECK fail, naming the missing flow.
func TestCheckFailsAfterFlowDeleted(t *testing.T) {
	c, n := node1(t, cluster.Options{})
	p := mustPod(t, c, n, "p")
	if err := c.CheckPod(p); err != nil {
		t.Fatalf("CHECK right after ADD: %v", err)
	}
	var mac string
	for _, i := range p.Result.Interfaces {
		if i.Sandbox != "" {
			mac = i.Mac
		}
	}
	if mac == "" {
		t.Fatalf("CNI result names no pod interface MAC: %+v", p.Result.Interfaces)
	}
	// The pod's L2 forwarding flow is the only one matching just its MAC.
	n.OVS.Ofctl(t, "del-flows", "br-int", "dl_dst="+mac)
	if out := n.OVS.Ofctl(t, "dump-flows", "br-int", "dl_dst="+mac); strings.Contains(out, "dl_dst="+mac) {
		t.Fatalf("ovs-ofctl did not delete the flow:\n%s", out)
	}
	err := c.CheckPod(p)
	if err == nil {
		t.Fatal("CHECK passed after one of the pod's flows was deleted from the switch")
	}
	for _, want := range []string{"is not on the switch", "dl_dst=" + mac, "table=podnet.l2_forward"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CHECK error %q does not say %q", err, want)
		}
	}
	t.Logf("CHECK: %v", err)
}
