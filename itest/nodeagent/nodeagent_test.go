package nodeagent_test

import (
	"net"
	"strings"
	"testing"

	"switchyard.dev/switchyard/itest/build"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

// The product agent itself (not a test stand-in) serves CNI through its
// supervised podnet plugin: pods on one node get addresses and reach each
// other and their gateway.
func TestRealAgentServesCNI(t *testing.T) {
	bins := build.Commands(t, "host/cmd/switchyard-agent", "cni/cmd/switchyard-cni", "plugins/podnet")
	cp := controlplane.Start(t)
	nb := nodeagent.Binaries{Agent: bins["switchyard-agent"], CNI: bins["switchyard-cni"], Plugins: map[string]string{"podnet": bins["podnet"]}}
	c := cluster.Start(t, cluster.Options{Nodes: 1, Client: cp.Client, StartAgent: func(t testenv.T, n *cluster.Node) {
		nodeagent.Start(t, n, nodeagent.Options{Bins: nb, ControlPlane: cp})
	}})
	n := c.Nodes[0]
	a := c.AddPod(t, cluster.PodSpec{Name: "a", Namespace: "demo", Node: n})
	b := c.AddPod(t, cluster.PodSpec{Name: "b", Namespace: "demo", Node: n})
	if !n.PodCIDR.Contains(a.IP()) || !n.PodCIDR.Contains(b.IP()) || a.IP().Equal(b.IP()) {
		t.Fatalf("pod IPs %s, %s: want distinct addresses in %s", a.IP(), b.IP(), n.PodCIDR)
	}
	probe.Serve(t, b.NetNS, 8080)
	for _, proto := range []probe.Protocol{probe.ICMP, probe.TCP, probe.UDP} {
		if err := probe.Check(a.NetNS, proto, b.IP(), 8080, 0); err != nil {
			t.Errorf("a -> b over %s: %v", proto, err)
		}
	}
	gw := gatewayOf(n.PodCIDR)
	if err := probe.Check(a.NetNS, probe.ICMP, gw, 0, 0); err != nil {
		t.Errorf("a -> gateway %s: %v", gw, err)
	}
	if err := c.CheckPod(a); err != nil {
		t.Errorf("CNI CHECK of a: %v", err)
	}
	c.DeletePod(t, b)
	if out := n.OVS.Ofctl(t, "dump-flows", "br-int"); strings.Contains(out, b.IP().String()+",") || strings.Contains(out, b.IP().String()+" ") {
		t.Errorf("flows still name deleted pod b (%s):\n%s", b.IP(), out)
	}
}

func gatewayOf(cidr *net.IPNet) net.IP {
	ip := cidr.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1)
}
