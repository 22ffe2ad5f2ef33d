package tunnel

import (
	"slices"
	"strings"
	"testing"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/probe"
)

// Pods on three nodes reach each other across Geneve over ICMP, TCP, UDP
// and SCTP in both directions on every pair, over IPv4 and (dual-stack)
// IPv6 pod CIDRs carried on the IPv4 underlay; nodes reach remote pods
// and pods reach remote nodes; pods get the MTU less Geneve's 50 bytes
// from the host, and a full-size packet with DF crosses.
func TestCrossNodeGeneve(t *testing.T) {
	e := start(t, opts{nodes: 3, dualStack: true})
	ps := e.pods(t, "p", e.c.Nodes)

	for _, p := range ps {
		out, err := p.Node.Exec("ip", "netns", "exec", p.NetNS, "cat", "/sys/class/net/"+p.IfName+"/mtu")
		if err != nil || strings.TrimSpace(out) != "1450" {
			t.Errorf("pod %s MTU %q (%v), want 1450: the uplink's 1500 less Geneve's 50", p.Key(), out, err)
		}
	}
	// The tunnel port is a flow-based Geneve port on br-int.
	n1 := e.c.Nodes[0]
	if got := strings.TrimSpace(n1.OVS.Vsctl(t, "get", "interface", "sy-tun0", "type", "options")); !strings.Contains(got, "geneve") ||
		!strings.Contains(got, `key=flow`) || !strings.Contains(got, `remote_ip=flow`) {
		t.Errorf("sy-tun0: %s, want a geneve port with key=flow, remote_ip=flow", got)
	}

	// The agent moved the node IP from eth0 onto br-phy, a netdev bridge
	// with eth0 as its port (ovs-vsctl and ip as witnesses).
	underlayOnBrPhy(t, n1)

	v4 := podEndpoints(ps, false)
	matrix(t, v4, v4, true, probe.ICMP, probe.TCP, probe.UDP, probe.SCTP)
	v6 := podEndpoints(ps, true)
	matrix(t, v6, v6, true, probe.ICMP, probe.TCP, probe.UDP)

	var nodes []probe.Endpoint
	for _, n := range e.c.Nodes {
		nodes = append(nodes, probe.Endpoint{Name: n.Name, NetNS: n.NetNS, IP: n.UnderlayIP})
		probe.Serve(t, n.NetNS, port)
	}
	// Every node reaches every pod (its own through the gateway, the
	// others' through the tunnel), and every pod every node. Pod to node
	// is not checked over UDP: the probe's UDP echo answers from the
	// address the node's routing picks (the gateway's, for a pod), which
	// the pod's connected socket ignores, with or without a tunnel.
	matrix(t, nodes, v4, true, probe.ICMP, probe.TCP, probe.UDP)
	// IPv6 too: the node's route to a remote IPv6 pod CIDR goes via the
	// peer's gateway with a permanent neighbour entry.
	matrix(t, nodes, v6, true, probe.ICMP, probe.TCP)
	matrix(t, v4, nodes, true, probe.ICMP, probe.TCP)

	// An agent restart finds br-phy in place and changes nothing.
	e.agents[n1.Name].Restart(t)
	e.waitSynced(t, n1)
	underlayOnBrPhy(t, n1)
	matrix(t, v4[:1], v4, true, probe.TCP)

	// 1450 - 20 (IP) - 8 (ICMP) = 1422 bytes of payload, DF set.
	if out, err := n1.Exec("ip", "netns", "exec", ps[0].NetNS, "ping", "-n", "-c", "1", "-W", "2", "-M", "do", "-s", "1422", ps[1].IP().String()); err != nil {
		t.Errorf("full-size ping with DF across the tunnel: %v\n%s", err, out)
	}
}

func underlayOnBrPhy(t *testing.T, n *cluster.Node) {
	t.Helper()
	if dp := strings.TrimSpace(n.OVS.Vsctl(t, "get", "bridge", "br-phy", "datapath_type")); dp != "netdev" {
		t.Errorf("%s: br-phy datapath_type %q, want netdev", n.Name, dp)
	}
	if ports := strings.Fields(n.OVS.Vsctl(t, "list-ports", "br-phy")); !slices.Equal(ports, []string{"eth0"}) {
		t.Errorf("%s: br-phy ports %v, want [eth0]", n.Name, ports)
	}
	phy, _ := n.Exec("ip", "-4", "-o", "addr", "show", "dev", "br-phy")
	eth, _ := n.Exec("ip", "-4", "-o", "addr", "show", "dev", "eth0")
	if !strings.Contains(phy, n.UnderlayIP.String()+"/24") || strings.TrimSpace(eth) != "" {
		t.Errorf("%s: node IP %s not moved from eth0 to br-phy:\nbr-phy: %s\neth0: %s", n.Name, n.UnderlayIP, phy, eth)
	}
}
