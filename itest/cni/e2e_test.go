package cni

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

func node1(t *testing.T, o cluster.Options) (*cluster.Cluster, *cluster.Node) {
	t.Helper()
	needBins(t)
	if o.StartAgent == nil {
		o.StartAgent = startAgent
	}
	o.Nodes = 1
	c := cluster.Start(t, o)
	return c, c.Nodes[0]
}

func TestAddGivesConnectivity(t *testing.T) {
	c, n := node1(t, cluster.Options{})
	a, b := mustPod(t, c, n, "a"), mustPod(t, c, n, "b")
	gw := net.ParseIP("10.244.1.1")
	for _, p := range []*cluster.Pod{a, b} {
		if !n.PodCIDR.Contains(p.IP()) || p.IP().Equal(gw) {
			t.Errorf("pod %s got %s, want an address of %s other than the gateway", p.Key(), p.IP(), n.PodCIDR)
		}
	}
	if a.IP().Equal(b.IP()) {
		t.Fatalf("both pods got %s", a.IP())
	}
	probe.Serve(t, b.NetNS, 8080)
	probe.Serve(t, n.NetNS, 8081)
	reach(t, a.NetNS, gw)
	reach(t, a.NetNS, b.IP())
	reach(t, b.NetNS, a.IP())
	reachTCP(t, a.NetNS, b.IP(), 8080)
	reachTCP(t, a.NetNS, gw, 8081)
	// The node reaches its pods through the gateway.
	reach(t, n.NetNS, a.IP())
	reachTCP(t, n.NetNS, b.IP(), 8080)
	if err := c.CheckPod(a); err != nil {
		t.Errorf("CHECK after ADD: %v", err)
	}
}

func TestDualStack(t *testing.T) {
	c, n := node1(t, cluster.Options{DualStack: true})
	a, b := mustPod(t, c, n, "a"), mustPod(t, c, n, "b")
	v6 := func(p *cluster.Pod) net.IP {
		for _, ip := range p.IPs {
			if ip.To4() == nil {
				return ip
			}
		}
		t.Fatalf("pod %s has no IPv6 address: %v", p.Key(), p.IPs)
		return nil
	}
	if !n.PodCIDRv6.Contains(v6(a)) {
		t.Errorf("pod a IPv6 %s not in %s", v6(a), n.PodCIDRv6)
	}
	// CHECK reads the IPv6 flows back from the switch too.
	if err := c.CheckPod(a); err != nil {
		t.Errorf("CHECK of a dual-stack pod: %v", err)
	}
	probe.Serve(t, b.NetNS, 8080)
	gw6 := net.ParseIP(strings.TrimSuffix(n.PodCIDRv6.IP.String(), "::") + "::1")
	reach(t, a.NetNS, gw6)
	reach(t, a.NetNS, v6(b))
	reachTCP(t, a.NetNS, v6(b), 8080)
	reach(t, a.NetNS, b.IP())
}

// TestFlowsPerPod: a pod costs what it costs in Antrea, at most 5 flows
// for IPv4 and 8 for dual-stack, counted on the switch (dump-aggregate
// before and after each ADD, so the count does not rely on podnet's tags);
// the flows go again with the pod.
func TestFlowsPerPod(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts cluster.Options
		max  int
	}{
		{"IPv4", cluster.Options{}, 5},
		{"dual-stack", cluster.Options{DualStack: true}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, n := node1(t, tc.opts)
			count := func() int {
				out := n.OVS.Ofctl(t, "--no-stats", "dump-aggregate", "br-int")
				i := strings.Index(out, "flow_count=")
				if i < 0 {
					t.Fatalf("no flow_count in dump-aggregate output %q", out)
				}
				v, err := strconv.Atoi(strings.Fields(out[i+len("flow_count="):])[0])
				if err != nil {
					t.Fatalf("flow_count in %q: %v", out, err)
				}
				return v
			}
			base := count()
			a := mustPod(t, c, n, "a")
			first := count() - base
			b := mustPod(t, c, n, "b")
			second := count() - base - first
			t.Logf("flows per pod on the switch: %d, %d", first, second)
			for name, got := range map[string]int{"first pod": first, "second pod": second} {
				if got < 1 || got > tc.max {
					t.Errorf("%s added %d flows, want 1..%d:\n%s", name, got, tc.max, n.OVS.Ofctl(t, "dump-flows", "br-int"))
				}
			}
			// The node-wide flows still serve both pods.
			reach(t, a.NetNS, b.IP())
			reach(t, n.NetNS, b.IP())
			c.DeletePod(t, a)
			c.DeletePod(t, b)
			if got := count(); got != base {
				t.Errorf("after both DELs the switch holds %d flows, want %d as before the ADDs", got, base)
			}
		})
	}
}

func TestDelLeavesNothing(t *testing.T) {
	c, n := node1(t, cluster.Options{})
	before := footprintOf(t, n)
	p := mustPod(t, c, n, "gone")
	hostIf := p.Result.Interfaces[0].Name
	ofport := ofportOf(t, n, hostIf)
	if hits := flowsMentioning(t, n, ofport, p.IP().String()); len(hits) == 0 {
		t.Fatalf("no flow mentions the new pod (ofport %s, IP %s): the witness is broken", ofport, p.IP())
	}
	c.DeletePod(t, p)
	if diff := cmp.Diff(before, footprintOf(t, n), cmp.AllowUnexported(footprint{})); diff != "" {
		t.Errorf("node state after DEL differs from before ADD (-before +after):\n%s", diff)
	}
	if hits := flowsMentioning(t, n, ofport, p.IP().String()); len(hits) != 0 {
		t.Errorf("flows of the deleted pod remain:\n%s", strings.Join(hits, "\n"))
	}
	// DEL again, DEL of a never-added container, DEL with the netns gone:
	// all succeed.
	list, err := loadList(n)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(list.Plugins[0].Bytes)
	conf = strings.Replace(conf, "{", fmt.Sprintf(`{"cniVersion":%q,"name":%q,`, list.CNIVersion, list.Name), 1)
	for _, tc := range []struct{ name, id, netns string }{
		{"repeated", p.ContainerID, ""},
		{"never added", "never-added-" + testenv.RunID(), "/var/run/netns/" + testenv.Name("nope")},
	} {
		env := map[string]string{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": tc.id, "CNI_IFNAME": "eth0", "CNI_NETNS": tc.netns}
		if e, _ := runBinary(t, env, conf); e != nil {
			t.Errorf("DEL %s: %+v", tc.name, e)
		}
	}
}

func TestDelAfterNetnsGone(t *testing.T) {
	c, n := node1(t, cluster.Options{})
	before := footprintOf(t, n)
	p := mustPod(t, c, n, "p")
	if err := netns.Delete(p.NetNS); err != nil {
		t.Fatal(err)
	}
	c.DeletePod(t, p)
	if diff := cmp.Diff(before, footprintOf(t, n), cmp.AllowUnexported(footprint{})); diff != "" {
		t.Errorf("node state after DEL of a pod whose netns was gone (-before +after):\n%s", diff)
	}
}

func TestCheckFailsAfterVethDeleted(t *testing.T) {
	c, n := node1(t, cluster.Options{})
	p := mustPod(t, c, n, "p")
	if err := c.CheckPod(p); err != nil {
		t.Fatalf("CHECK right after ADD: %v", err)
	}
	if out, err := netns.Exec(p.NetNS, "ip", "link", "del", "eth0"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	err := c.CheckPod(p)
	if err == nil {
		t.Fatal("CHECK passed after the pod's veth was deleted")
	}
	for _, want := range []string{"interface eth0 does not exist in the pod", "host end"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("CHECK error %q does not say %q", err, want)
		}
	}
}

func TestSpoofedPodReachesNobody(t *testing.T) {
	c, n := node1(t, cluster.Options{})
	a, b := mustPod(t, c, n, "a"), mustPod(t, c, n, "b")
	gw := net.ParseIP("10.244.1.1")
	reach(t, a.NetNS, b.IP())
	t.Run("other IP", func(t *testing.T) {
		// a takes an address that is not its own (here: an unused one).
		fake := "10.244.1.200"
		for _, cmd := range [][]string{
			{"ip", "addr", "flush", "dev", "eth0"},
			{"ip", "addr", "add", fake + "/32", "dev", "eth0"},
			{"ip", "route", "add", "10.244.1.1", "dev", "eth0", "scope", "link"},
			{"ip", "route", "add", "default", "via", "10.244.1.1"},
			{"ip", "neigh", "flush", "all"},
		} {
			if out, err := netns.Exec(a.NetNS, cmd...); err != nil {
				t.Fatalf("%v %s", err, out)
			}
		}
		unreachable(t, a.NetNS, b.IP())
		unreachable(t, a.NetNS, gw)
		// And b's own address.
		for _, cmd := range [][]string{
			{"ip", "addr", "flush", "dev", "eth0"},
			{"ip", "addr", "add", b.IP().String() + "/32", "dev", "eth0"},
			{"ip", "route", "add", "10.244.1.1", "dev", "eth0", "scope", "link"},
			{"ip", "route", "add", "default", "via", "10.244.1.1"},
		} {
			netns.Exec(a.NetNS, cmd...)
		}
		unreachable(t, a.NetNS, gw)
	})
	t.Run("other MAC", func(t *testing.T) {
		if out, err := netns.Exec(b.NetNS, "ip", "link", "set", "eth0", "address", "0a:58:0a:f4:01:fe"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		netns.Exec(b.NetNS, "ip", "neigh", "flush", "all")
		unreachable(t, b.NetNS, gw)
	})
}

func TestBadInput(t *testing.T) {
	c, n := node1(t, cluster.Options{})
	list, err := loadList(n)
	if err != nil {
		t.Fatal(err)
	}
	conf := func(version string) string {
		return strings.Replace(string(list.Plugins[0].Bytes), "{", fmt.Sprintf(`{"cniVersion":%q,"name":%q,`, version, list.Name), 1)
	}
	okArgs := "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=bad"
	pod := netns.Create(t, testenv.Name("bad"))
	existing := mustPod(t, c, n, "existing")
	before := footprintOf(t, n)
	tests := []struct {
		name      string
		id, netns string
		args      string
		stdin     string
		wantCode  uint
		wantMsg   string
	}{
		{"malformed JSON", "bad1", netns.Path(pod), okArgs, `{"cniVersion":"1.0.0","name":`, 6, "unexpected end of JSON"},
		{"unknown cniVersion", "bad2", netns.Path(pod), okArgs, conf("9.9.9"), 1, "9.9.9"},
		{"missing CNI_ARGS", "bad3", netns.Path(pod), "", conf("1.0.0"), 4, "K8S_POD_NAMESPACE and K8S_POD_NAME"},
		{"nonexistent netns", "bad4", "/var/run/netns/" + testenv.Name("none"), okArgs, conf("1.0.0"), 8, "does not exist"},
		{"repeated ADD", existing.ContainerID, netns.Path(existing.NetNS), okArgs, conf("1.0.0"), 103, "already has eth0 attached"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": tc.id, "CNI_NETNS": tc.netns, "CNI_IFNAME": "eth0", "CNI_ARGS": tc.args}
			e, out := runBinary(t, env, tc.stdin)
			if e == nil {
				t.Fatalf("ADD succeeded: %s", out)
			}
			if e.Code != tc.wantCode || !strings.Contains(e.Msg+" "+e.Details, tc.wantMsg) {
				t.Errorf("got code %d %q (%s), want code %d mentioning %q", e.Code, e.Msg, e.Details, tc.wantCode, tc.wantMsg)
			}
		})
	}
	if diff := cmp.Diff(before, footprintOf(t, n), cmp.AllowUnexported(footprint{})); diff != "" {
		t.Errorf("bad input leaked state (-before +after):\n%s", diff)
	}
	// The existing pod was not disturbed by the repeated ADD.
	if err := c.CheckPod(existing); err != nil {
		t.Errorf("existing pod after a repeated ADD: %v", err)
	}
}

func TestExhaustedCIDR(t *testing.T) {
	// A /29 holds .2-.6 once the gateway (.1) is taken: five pods.
	c, n := node1(t, cluster.Options{StartAgent: agentStarter(agentOptions{podCIDRs: []string{"10.244.1.0/29"}})})
	for i := range 5 {
		mustPod(t, c, n, fmt.Sprintf("p%d", i))
	}
	before := footprintOf(t, n)
	_, err := addPod(t, n, "sixth")
	if err == nil || !strings.Contains(err.Error(), "exhausted") {
		t.Fatalf("sixth ADD: err = %v, want the pod CIDR exhausted", err)
	}
	if diff := cmp.Diff(before, footprintOf(t, n), cmp.AllowUnexported(footprint{})); diff != "" {
		t.Errorf("failed ADD leaked state (-before +after):\n%s", diff)
	}
}

func TestFlowFailureRollsBack(t *testing.T) {
	// Room for podnet's base flows (output and three default classifier
	// flows, eight gateway and node-wide ARP flows, the host's miss flow
	// for l3_forward) and one pod of five: the second pod's flows are
	// refused by the host's per-plugin limit.
	c, n := node1(t, cluster.Options{StartAgent: agentStarter(agentOptions{maxFlows: 13 + 5})})
	mustPod(t, c, n, "p1")
	before := footprintOf(t, n)
	_, err := addPod(t, n, "p2")
	if err == nil {
		t.Fatal("second ADD succeeded past the flow limit")
	}
	t.Logf("refused as expected: %v", err)
	if diff := cmp.Diff(before, footprintOf(t, n), cmp.AllowUnexported(footprint{})); diff != "" {
		t.Errorf("failed ADD leaked state (-before +after):\n%s", diff)
	}
}

func TestPortFailureRollsBack(t *testing.T) {
	c, n := node1(t, cluster.Options{})
	mustPod(t, c, n, "p1")
	before := footprintOf(t, n)
	n.OVS.KillVswitchd(t)
	_, err := addPod(t, n, "p2")
	n.OVS.StartVswitchd(t)
	if err == nil {
		t.Fatal("ADD succeeded with ovs-vswitchd down")
	}
	t.Logf("refused as expected: %v", err)
	if diff := cmp.Diff(before, footprintOf(t, n), cmp.AllowUnexported(footprint{})); diff != "" {
		t.Errorf("failed ADD leaked state (-before +after):\n%s", diff)
	}
}

func TestParallelAddsThenDels(t *testing.T) {
	_, n := node1(t, cluster.Options{})
	before := footprintOf(t, n)
	const count = 50
	pods := make([]*pod, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i := range count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pods[i], errs[i] = addPod(t, n, fmt.Sprintf("par%d", i))
		}()
	}
	wg.Wait()
	seen := map[string]string{}
	for i, p := range pods {
		if errs[i] != nil {
			t.Errorf("ADD %d: %v", i, errs[i])
			continue
		}
		if other, dup := seen[p.IP().String()]; dup {
			t.Errorf("%s given to %s and %s", p.IP(), other, p.name)
		}
		seen[p.IP().String()] = p.name
	}
	f := footprintOf(t, n)
	if len(f.ports) != count || len(f.links) != count || len(f.ipam) != count || f.records != count {
		t.Errorf("after %d ADDs: %d OVS ports, %d veths, %d IPAM reservations, %d interface records",
			count, len(f.ports), len(f.links), len(f.ipam), f.records)
	}
	if len(pods) > 1 && pods[0] != nil && pods[count-1] != nil {
		reach(t, pods[0].netns, pods[count-1].IP())
	}
	for i := range count {
		if pods[i] == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pods[i].del(); err != nil {
				t.Errorf("DEL %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if diff := cmp.Diff(before, footprintOf(t, n), cmp.AllowUnexported(footprint{})); diff != "" {
		t.Errorf("after 50 DELs (-before +after):\n%s", diff)
	}
}

func TestAgentRestartKeepsPods(t *testing.T) {
	c, n := node1(t, cluster.Options{})
	before := footprintOf(t, n)
	a, b := mustPod(t, c, n, "a"), mustPod(t, c, n, "b")
	reach(t, a.NetNS, b.IP())
	// Ping through the restart: the flows stay on the switch, so not one
	// packet may be lost while the agent and podnet are down and resync.
	type result struct {
		out string
		err error
	}
	pinged := make(chan result, 1)
	go func() {
		out, err := netns.Exec(a.NetNS, "ping", "-c", "40", "-i", "0.1", "-W", "1", b.IP().String())
		pinged <- result{out, err}
	}()
	agentOf(t, n).Restart(t)
	r := <-pinged
	if r.err != nil || !strings.Contains(r.out, " 0% packet loss") {
		t.Errorf("ping across the agent restart lost packets: %v\n%s", r.err, r.out)
	}
	reach(t, a.NetNS, b.IP())
	reach(t, b.NetNS, net.ParseIP("10.244.1.1"))
	if err := c.CheckPod(a); err != nil {
		t.Errorf("CHECK after agent restart: %v", err)
	}
	c.DeletePod(t, a)
	c.DeletePod(t, b)
	if diff := cmp.Diff(before, footprintOf(t, n), cmp.AllowUnexported(footprint{})); diff != "" {
		t.Errorf("DEL after an agent restart left (-before +after):\n%s", diff)
	}
}

// TestAgentDownMeansTryAgain: with the agent stopped the binary must tell
// the runtime to retry (ADD: 11) and report the plugin unavailable
// (STATUS: 50), naming the socket.
func TestAgentDownMeansTryAgain(t *testing.T) {
	_, n := node1(t, cluster.Options{})
	list, err := loadList(n)
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.Replace(string(list.Plugins[0].Bytes), "{", fmt.Sprintf(`{"cniVersion":%q,"name":%q,`, list.CNIVersion, list.Name), 1)
	a := agentOf(t, n)
	a.Stop()
	pod := createNetns(t, "down")
	for _, tc := range []struct {
		cmd  string
		code uint
	}{{"ADD", 11}, {"STATUS", 50}} {
		env := map[string]string{"CNI_COMMAND": tc.cmd, "CNI_CONTAINERID": "down", "CNI_NETNS": netns.Path(pod), "CNI_IFNAME": "eth0",
			"CNI_ARGS": "K8S_POD_NAMESPACE=default;K8S_POD_NAME=down"}
		e, out := runBinary(t, env, conf)
		if e == nil {
			t.Fatalf("%s with the agent down succeeded: %s", tc.cmd, out)
		}
		if e.Code != tc.code || !strings.Contains(e.Msg, "agent is not running") || !strings.Contains(e.Msg, a.CNISocket) {
			t.Errorf("%s: code %d %q, want code %d saying the agent at %s is not running", tc.cmd, e.Code, e.Msg, tc.code, a.CNISocket)
		}
	}
	a.Run(t)
	if e, out := runBinary(t, map[string]string{"CNI_COMMAND": "STATUS"}, conf); e != nil {
		t.Errorf("STATUS after the agent is back: %+v %s", e, out)
	}
}

// TestPodnetCrash kills the podnet plugin process: the agent restarts it,
// the pods keep their connectivity throughout (the flows stay on the
// switch), and ADD and DEL work again once the new incarnation runs.
func TestPodnetCrash(t *testing.T) {
	c, n := node1(t, cluster.Options{})
	before := footprintOf(t, n)
	a, b := mustPod(t, c, n, "a"), mustPod(t, c, n, "b")
	old := pluginPids(t, n)
	if len(old) != 1 {
		t.Fatalf("want one plugin process under the agent, have %v", old)
	}
	pinged := make(chan string, 1)
	go func() {
		out, _ := netns.Exec(a.NetNS, "ping", "-c", "30", "-i", "0.1", "-W", "1", b.IP().String())
		pinged <- out
	}()
	if out, err := testenv.Run("kill", "-9", fmt.Sprint(old[0])); err != nil {
		t.Fatalf("killing podnet: %v %s", err, out)
	}
	if out := <-pinged; !strings.Contains(out, " 0% packet loss") {
		t.Errorf("ping while podnet restarted lost packets:\n%s", out)
	}
	var p *pod
	err := testenv.Eventually("a pod ADD to succeed after podnet restarted", 30*time.Second, 200*time.Millisecond, func() error {
		var err error
		p, err = addPod(t, n, "after")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	reach(t, p.netns, a.IP())
	if err := p.del(); err != nil {
		t.Errorf("DEL after the restart: %v", err)
	}
	c.DeletePod(t, a)
	c.DeletePod(t, b)
	if diff := diffFootprint(before, footprintOf(t, n)); diff != "" {
		t.Errorf("after DELs (-before +after):\n%s", diff)
	}
}

// TestGatewayARPAnsweredBySwitch: with the gateway's kernel interface down,
// nothing on the node can answer ARP, yet a pod still resolves its gateway
// to the gateway's MAC, because podnet's responder flow answers in the
// switch (and the kernel no longer answers on the pod's host veth with the
// veth's own MAC).
func TestGatewayARPAnsweredBySwitch(t *testing.T) {
	c, n := node1(t, cluster.Options{})
	a := mustPod(t, c, n, "a")
	gw := net.ParseIP("10.244.1.1")
	if _, err := n.Exec("ip", "link", "set", "sy-gw0", "down"); err != nil {
		t.Fatal(err)
	}
	defer n.Exec("ip", "link", "set", "sy-gw0", "up")
	if _, err := netns.Exec(a.NetNS, "ip", "neigh", "flush", "all"); err != nil {
		t.Fatal(err)
	}
	// The ping itself cannot be answered (the gateway is down); it only
	// makes the pod ask for the gateway's MAC.
	netns.Exec(a.NetNS, "ping", "-c", "1", "-W", "1", gw.String())
	out, err := netns.Exec(a.NetNS, "ip", "neigh", "show", gw.String())
	if err != nil {
		t.Fatal(err)
	}
	gwMAC, err := n.Exec("cat", "/sys/class/net/sy-gw0/address")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "lladdr "+strings.TrimSpace(gwMAC)) {
		t.Fatalf("pod did not learn the gateway MAC %s with sy-gw0 down; neighbour table:\n%s\nflows:\n%s",
			strings.TrimSpace(gwMAC), out, n.OVS.Ofctl(t, "dump-flows", "br-int", "arp"))
	}
	flows := n.OVS.Ofctl(t, "dump-flows", "br-int", "arp,arp_op=1,arp_tpa="+gw.String())
	hit := false
	for _, l := range strings.Split(flows, "\n") {
		if strings.Contains(l, "IN_PORT") && strings.Contains(l, "arp_op=1") && !strings.Contains(l, "n_packets=0,") {
			hit = true
		}
	}
	if !hit {
		t.Errorf("no responder flow (arp_op=1 … IN_PORT) was hit:\n%s", flows)
	}
}
