package egress

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/testenv"
)

// TestEgressDualStack runs Egress on a dual-stack cluster whose underlay
// and external host have IPv4 and IPv6 addresses: an Egress from a pool
// with ranges of both families gets one address of each, held by one
// node, and the selected pods on every node reach the external host with
// the Egress IPv4 address over IPv4 and the Egress IPv6 address over IPv6
// (tunnelled to the holder from the other nodes); an IPv6-only Egress
// translates its pods' IPv6 traffic only; the holder fails over with both
// addresses (announced with gratuitous ARP and unsolicited neighbour
// advertisements); deleting the Egress leaves no address or rule behind.
func TestEgressDualStack(t *testing.T) {
	e := startDualStack(t, 3)
	var web, plain []*cluster.Pod
	for _, n := range e.c.Nodes {
		web = append(web, e.c.AddPod(t, cluster.PodSpec{Name: fmt.Sprintf("web-%d", n.Index), Namespace: namespace, Node: n, Labels: map[string]string{"app": "web"}}))
		plain = append(plain, e.c.AddPod(t, cluster.PodSpec{Name: fmt.Sprintf("plain-%d", n.Index), Namespace: namespace, Node: n, Labels: map[string]string{"app": "plain"}}))
	}
	all := slices.Concat(web, plain)
	for _, p := range all {
		if len(p.IPs) != 2 {
			t.Fatalf("pod %s has addresses %v, want one of each family", p.Key(), p.IPs)
		}
	}
	node4 := func(p *cluster.Pod) string { return p.Node.UnderlayIP.String() }
	node6 := func(p *cluster.Pod) string { return p.Node.UnderlayIPv6.String() }
	// expect checks every pod over both families: want4 and want6 give the
	// source address the external host should see.
	expect := func(t *testing.T, what string, pods []*cluster.Pod, want4, want6 func(*cluster.Pod) string) {
		t.Helper()
		w4, w6 := map[*cluster.Pod]string{}, map[*cluster.Pod]string{}
		for _, p := range pods {
			if e.cut[p.Node.Name] {
				continue
			}
			w4[p], w6[p] = want4(p), want6(p)
		}
		expectSeenAt(t, what+" (IPv4)", e.extIP, w4)
		expectSeenAt(t, what+" (IPv6)", e.extIPv6, w6)
	}
	is := func(s string) func(*cluster.Pod) string { return func(*cluster.Pod) string { return s } }
	expect(t, "no Egress", all, node4, node6)

	e.createPool(t, &crdv1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "dual"},
		Spec: crdv1.ExternalIPPoolSpec{IPRanges: []crdv1.IPRange{{Start: "198.18.0.100", End: "198.18.0.101"}, {CIDR: "fd00:198:18::100/127"}}}})
	e.createEgress(t, &crdv1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: crdv1.EgressSpec{ExternalIPPool: "dual", AppliedTo: crdv1.EgressAppliedTo{PodSelector: selector("app", "web")}}})
	eg := e.waitCondition(t, "web", crdv1.ConditionIPAssigned, metav1.ConditionTrue, crdv1.ReasonAssigned)
	if got, want := eg.Status.EgressIPs, []string{"198.18.0.100", "fd00:198:18::100"}; !slices.Equal(got, want) || eg.Status.EgressIP != want[0] {
		t.Fatalf("Egress web: egressIP %q egressIPs %v, want %s and %v", eg.Status.EgressIP, got, want[0], want)
	}
	eip4, eip6 := eg.Status.EgressIPs[0], eg.Status.EgressIPs[1]
	holder := e.c.Node(eg.Status.EgressNode)
	t.Logf("Egress web: %s and %s held by %s (%s)", eip4, eip6, holder.Name, conditionsOf(eg))

	t.Run("selected pods use the Egress IP of each family, the others their node's", func(t *testing.T) {
		expect(t, "Egress web", web, is(eip4), is(eip6))
		expect(t, "Egress web", plain, node4, node6)
		for _, n := range e.c.Nodes {
			targets, _ := snatTargets(t, n.NetNS)
			has := slices.Contains(targets, eip4) && slices.Contains(targets, eip6)
			if (n == holder) != has {
				t.Errorf("%s SNATs to %v; want both Egress IPs there only on the holder %s", n.Name, targets, holder.Name)
			}
			if got := egressIPv6On(t, n); (n == holder) != (got == eip6) {
				t.Errorf("%s holds IPv6 Egress address %q; want %s only on the holder", n.Name, got, eip6)
			}
		}
	})

	t.Run("an IPv6 Egress translates its pods' IPv6 traffic only", func(t *testing.T) {
		e.createEgress(t, &crdv1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "six"},
			Spec: crdv1.EgressSpec{EgressIP: "fd00:198:18::120", AppliedTo: crdv1.EgressAppliedTo{PodSelector: selector("app", "plain")}}})
		six := e.waitCondition(t, "six", crdv1.ConditionIPAssigned, metav1.ConditionTrue, crdv1.ReasonAssigned)
		if !slices.Equal(six.Status.EgressIPs, []string{"fd00:198:18::120"}) {
			t.Fatalf("Egress six: egressIPs %v, want [fd00:198:18::120]", six.Status.EgressIPs)
		}
		expect(t, "Egress six", plain, node4, is("fd00:198:18::120"))
		expect(t, "Egress six beside web", web, is(eip4), is(eip6))
		e.deleteEgress(t, "six")
		expect(t, "Egress six deleted", plain, node4, node6)
	})

	t.Run("failover keeps both source IPs", func(t *testing.T) {
		var client *cluster.Pod
		for _, p := range web {
			if p.Node != holder {
				client = p
				break
			}
		}
		// The external host has the holder's MAC for both addresses now;
		// only the new holder's announcements can move them.
		for _, dst := range []net.IP{e.extIP, e.extIPv6} {
			if got, err := seenAt(client.NetNS, dst, 2*time.Second); err != nil || (got != eip4 && got != eip6) {
				t.Fatalf("before failover %s is seen at %s as %q (%v)", client.Key(), dst, got, err)
			}
		}
		e.agents[holder.Name].Process.Kill()
		cut(t, e, holder)
		t0 := time.Now()
		for _, c := range []struct {
			dst  net.IP
			want string
		}{{e.extIPv6, eip6}, {e.extIP, eip4}} {
			err := testenv.Eventually(fmt.Sprintf("the external host sees %s again from %s", c.want, client.Key()), 30*time.Second, 20*time.Millisecond, func() error {
				got, err := seenAt(client.NetNS, c.dst, 300*time.Millisecond)
				if err != nil || got != c.want {
					return fmt.Errorf("seen as %q (%v)", got, err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("failover: %s seen again as %s %v after the cut", client.Key(), c.want, time.Since(t0).Round(time.Millisecond))
		}
		eg := e.waitCondition(t, "web", crdv1.ConditionIPAssigned, metav1.ConditionTrue, crdv1.ReasonAssigned)
		next := e.c.Node(eg.Status.EgressNode)
		if next == nil || next == holder {
			t.Fatalf("egressNode %q after the failover", eg.Status.EgressNode)
		}
		if got := egressIPv6On(t, next); got != eip6 {
			t.Errorf("the new holder %s holds %q, want %s", next.Name, got, eip6)
		}
		expect(t, "after failover", web, is(eip4), is(eip6))
		holder = next
	})

	t.Run("a deleted Egress leaves nothing behind", func(t *testing.T) {
		e.deleteEgress(t, "web")
		expect(t, "Egress deleted", all, node4, node6)
		for _, n := range e.c.Nodes {
			if e.cut[n.Name] {
				continue
			}
			if targets, _ := snatTargets(t, n.NetNS); len(targets) > 0 {
				t.Errorf("%s still SNATs to %v", n.Name, targets)
			}
			if got := egressIPv6On(t, n); got != "" {
				t.Errorf("%s still holds %s", n.Name, got)
			}
		}
	})
}

// egressIPv6On is the IPv6 Egress address on n's uplink ("" for none;
// the uplink is br-phy here, which took over eth0's addresses): the
// plugin's own are deprecated host addresses without DAD, read here with
// iproute2 as an independent witness.
func egressIPv6On(t testing.TB, n *cluster.Node) string {
	t.Helper()
	out, err := n.Exec("ip", "-6", "-o", "addr", "show")
	if err != nil {
		t.Fatalf("ip addr on %s: %v %s", n.Name, err, out)
	}
	var got []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[1] == "lo" || !strings.HasSuffix(f[3], "/128") {
			continue
		}
		if !strings.Contains(l, "nodad") || !strings.Contains(l, "deprecated") {
			t.Errorf("%s: an IPv6 /128 that is not the plugin's kind: %s", n.Name, l)
			continue
		}
		if _, err := netip.ParsePrefix(f[3]); err == nil {
			got = append(got, strings.TrimSuffix(f[3], "/128"))
		}
	}
	return strings.Join(got, ",")
}

// conditionsOf names the Egress's conditions for the log.
func conditionsOf(eg *crdv1.Egress) string {
	var s []string
	for _, c := range eg.Status.Conditions {
		s = append(s, c.Type+"="+string(c.Status))
	}
	return strings.Join(s, " ")
}
