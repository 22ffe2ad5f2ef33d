package tunnel

import (
	"context"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

// With type: vxlan the tunnel works the same. On the same cluster: a pod
// reaching a host outside the cluster is masqueraded to its node's IP,
// while pod-to-pod and pod-to-node traffic keeps the pod's address; a 4th
// node added at runtime becomes reachable, and deleting its Node removes
// its flows (dump-flows) and routes (ip route) from the others. In between,
// an update of its InternalIP rewrites only the routing flow on the others.
func TestVXLANMasqueradeAndNodeJoinLeave(t *testing.T) {
	e := start(t, opts{nodes: 3, tunnel: map[string]any{"type": "vxlan"}})
	n1, n2 := e.c.Nodes[0], e.c.Nodes[1]
	if got := n1.OVS.Vsctl(t, "get", "interface", "sy-tun0", "type"); strings.TrimSpace(got) != "vxlan" {
		t.Errorf("sy-tun0 type %q, want vxlan", got)
	}
	ps := e.pods(t, "v", e.c.Nodes)
	for _, p := range ps {
		out, err := p.Node.Exec("ip", "netns", "exec", p.NetNS, "cat", "/sys/class/net/"+p.IfName+"/mtu")
		if err != nil || strings.TrimSpace(out) != "1450" {
			t.Errorf("pod %s MTU %q (%v), want 1450: the uplink's 1500 less VXLAN's 50", p.Key(), out, err)
		}
	}
	v4 := podEndpoints(ps, false)
	matrix(t, v4, v4, true, probe.ICMP, probe.TCP, probe.UDP, probe.SCTP)

	t.Run("masquerade", func(t *testing.T) {
		ext, extIP := e.c.AddExternal(t, 250)
		whoami(t, ext, 9090)
		whoami(t, ps[1].NetNS, 9090)
		whoami(t, n2.NetNS, 9090)
		for _, tc := range []struct {
			what string
			ip   net.IP
			want string
		}{
			{"a host outside the cluster sees the node IP", extIP, n1.UnderlayIP.String()},
			{"a remote pod sees the pod IP", ps[1].IP(), ps[0].IP().String()},
			{"a remote node sees the pod IP", n2.UnderlayIP, ps[0].IP().String()},
		} {
			got, err := seenAs(ps[0].NetNS, tc.ip, 9090)
			if err != nil || got != tc.want {
				t.Errorf("%s: %s from %s seen as %q (%v), want %s", tc.what, tc.ip, ps[0].Key(), got, err, tc.want)
			}
		}
	})

	t.Run("node joins and leaves", func(t *testing.T) {
		n4 := e.c.AddNode(t)
		e.waitSynced(t, n4)
		p4 := e.pods(t, "v", []*cluster.Node{n4})[0]
		all := append(append([]probe.Endpoint(nil), v4...), podEndpoints([]*cluster.Pod{p4}, false)...)
		matrix(t, all, all, true, probe.ICMP, probe.TCP)
		flows := peerFlows(t, n1, n4.UnderlayIP)
		route := routeTo(t, n1, n4.PodCIDR)
		t.Logf("node-1 after node-4 joined:\n%s\n%s", strings.Join(flows, "\n"), route)
		if len(flows) != 1 || !strings.Contains(route, "via 10.244.4.1 dev sy-gw0") || !strings.Contains(route, "onlink") {
			t.Fatalf("node-1 does not route node-4's pod CIDR into the tunnel: flows %q, route %q", flows, route)
		}

		// An update changes only what differs: node-4 moves to another
		// underlay address; node-1 rewrites the routing flow's tun_dst in
		// place and leaves the ARP answer for node-4's gateway as it was.
		arpBefore := flowLine(t, n1, "arp_tpa=10.244.4.1")
		newIP := net.IPv4(198, 18, 0, 44).To4()
		if _, err := n4.Exec("ip", "addr", "add", newIP.String()+"/24", "dev", "br-phy"); err != nil {
			t.Fatalf("%v", err)
		}
		setInternalIP(t, e, n4, newIP)
		err := testenv.Eventually("node-1 to follow node-4's new address", 20*time.Second, 100*time.Millisecond, func() error {
			if f := peerFlows(t, n1, newIP); len(f) != 1 {
				return errorf("flows to %s: %q", newIP, f)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v", err)
		}
		if old := peerFlows(t, n1, n4.UnderlayIP); len(old) != 0 {
			t.Errorf("node-1 still tunnels to node-4's old address: %q", old)
		}
		if arpAfter := flowLine(t, n1, "arp_tpa=10.244.4.1"); cookieDuration(arpAfter) < cookieDuration(arpBefore) {
			t.Errorf("the ARP answer for node-4's gateway was re-installed by an update that did not change it:\nbefore %s\nafter  %s", arpBefore, arpAfter)
		}
		matrix(t, v4[:1], podEndpoints([]*cluster.Pod{p4}, false), true, probe.TCP)

		e.c.DeleteNodeObject(t, n4)
		err = testenv.Eventually("node-1 to forget node-4", 20*time.Second, 100*time.Millisecond, func() error {
			if f, r := peerFlows(t, n1, newIP), routeTo(t, n1, n4.PodCIDR); len(f) > 0 || r != "" {
				return errorf("flows %q, route %q", f, r)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v", err)
		}
		// The ARP answer for node-4's gateway went with its route.
		if strings.Contains(n1.OVS.Ofctl(t, "-O", "OpenFlow15", "dump-flows", "br-int"), "arp_tpa=10.244.4.1") {
			t.Errorf("node-1 still answers ARP for node-4's gateway after the node was deleted")
		}
		matrix(t, v4[:1], podEndpoints([]*cluster.Pod{p4}, false), false, probe.TCP)
		err = testenv.Eventually("node-1's log of node-4's removal", 10*time.Second, 100*time.Millisecond, func() error {
			if log := e.agents[n1.Name].Log(); !strings.Contains(log, "peer node removed") || !strings.Contains(log, `"flows_deleted":2`) {
				return errorf("node-1's agent log has no removal of node-4 in one batch of its 2 flows")
			}
			return nil
		})
		if err != nil {
			t.Errorf("%v", err)
		}
	})
}

// setInternalIP replaces the InternalIP of n's Node object.
func setInternalIP(t *testing.T, e *env, n *cluster.Node, ip net.IP) {
	t.Helper()
	ctx := context.Background()
	obj, err := e.cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	for i, a := range obj.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			obj.Status.Addresses[i].Address = ip.String()
		}
	}
	if _, err := e.cp.Client.CoreV1().Nodes().UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating Node %s: %v", n.Name, err)
	}
}

// flowLine is the one br-int flow of n whose text contains s.
func flowLine(t *testing.T, n *cluster.Node, s string) string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(n.OVS.Ofctl(t, "-O", "OpenFlow15", "dump-flows", "br-int"), "\n") {
		if strings.Contains(l, s) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	if len(out) != 1 {
		t.Fatalf("%s: want one flow with %q, have %q", n.Name, s, out)
	}
	return out[0]
}

var durationRE = regexp.MustCompile(`duration=([0-9.]+)s`)

// cookieDuration is how long a dumped flow has been installed, in seconds.
func cookieDuration(line string) float64 {
	m := durationRE.FindStringSubmatch(line)
	if m == nil {
		return -1
	}
	d, _ := strconv.ParseFloat(m[1], 64)
	return d
}
