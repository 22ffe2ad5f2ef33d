package cni

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/plugins/podnet/veth"
)

// warmPrefix names the host ends of podnet's warm pairs (package warm),
// lowerPrefix their lower ends, which pods' macvlans sit on.
const (
	warmPrefix  = "syw"
	lowerPrefix = "syl"
)

// warmPorts lists the pairs the pool made on br-int, as ovs-vsctl sees
// them, less those pods took, and fails unless each is attached and its
// host end exists in the node netns.
func warmPorts(t *testing.T, n *cluster.Node, taken ...string) ([]string, error) {
	t.Helper()
	var out []string
	for _, p := range strings.Fields(n.OVS.Vsctl(t, "--columns=name", "--bare", "find", "Port", "external_ids:switchyard.dev/origin=warm-pool")) {
		if slices.Contains(taken, p) {
			continue
		}
		if !strings.HasPrefix(p, warmPrefix) {
			return nil, fmt.Errorf("warm port %s does not carry the pool's prefix %s", p, warmPrefix)
		}
		if of := ofportOf(t, n, p); of == "-1" || of == "[]" || of == "0" {
			return nil, fmt.Errorf("warm port %s is not attached (ofport %s)", p, of)
		}
		for _, dev := range []string{p, veth.LowerName(p)} {
			if _, err := n.Exec("ip", "link", "show", "dev", dev); err != nil {
				return nil, fmt.Errorf("warm port %s has no %s: %v", p, dev, err)
			}
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// waitWarm waits until exactly want warm pairs are ready and returns them.
func waitWarm(t *testing.T, n *cluster.Node, want int, taken ...string) []string {
	t.Helper()
	var ready []string
	err := testenv.Eventually(fmt.Sprintf("%d warm ports on %s", want, n.Name), 20*time.Second, 100*time.Millisecond, func() error {
		var err error
		if ready, err = warmPorts(t, n, taken...); err != nil {
			return err
		}
		if len(ready) != want {
			return fmt.Errorf("%d ready: %v", len(ready), ready)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ready
}

// withoutWarm drops the pool's pairs from a footprint: they belong to no
// pod.
func withoutWarm(f footprint, warm []string) footprint {
	keep := func(names []string) []string {
		var out []string
		for _, n := range names {
			if !slices.Contains(warm, n) && !slices.Contains(warm, warmPrefix+strings.TrimPrefix(n, lowerPrefix)) {
				out = append(out, n)
			}
		}
		return out
	}
	f.ports, f.links = keep(f.ports), keep(f.links)
	return f
}

// TestWarmPorts: with warmPorts set, pods take pairs podnet attached
// before they asked, work like any pod, keep working and stay deletable
// across a podnet crash (whose pool the next podnet takes over), and
// turning the pool off leaves no warm pair behind.
func TestWarmPorts(t *testing.T) {
	c, n := node1(t, cluster.Options{StartAgent: agentStarter(agentOptions{podnet: map[string]any{"warmPorts": 2}})})
	ready := waitWarm(t, n, 2)
	before := withoutWarm(footprintOf(t, n), ready)

	a, b := mustPod(t, c, n, "a"), mustPod(t, c, n, "b")
	var taken []string
	for _, p := range []*cluster.Pod{a, b} {
		// The first took a pair that was ready; the second one of those or
		// the refill's.
		got := p.Result.Interfaces[0].Name
		ids := n.OVS.Vsctl(t, "get", "Port", got, "external_ids")
		if !strings.Contains(ids, `"switchyard.dev/origin"=warm-pool`) {
			t.Errorf("pod %s got host interface %s (external_ids %s), want a warm port", p.Key(), got, strings.TrimSpace(ids))
		}
		taken = append(taken, got)
		// Once the ADD is done, podnet names the pod on the port, as on
		// a port made for the pod.
		want := fmt.Sprintf(`"switchyard.dev/pod"="%s"`, p.Key())
		err := testenv.Eventually("the pod named on its warm port", 5*time.Second, 20*time.Millisecond, func() error {
			for _, table := range []string{"Port", "Interface"} {
				if ids := n.OVS.Vsctl(t, "get", table, got, "external_ids"); !strings.Contains(ids, want) {
					return fmt.Errorf("%s %s external_ids %s, want %s", table, got, strings.TrimSpace(ids), want)
				}
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	if !slices.Contains(ready, taken[0]) {
		t.Errorf("the first pod got host interface %s, want one of the ready warm ports %v", taken[0], ready)
	}
	gw := net.ParseIP("10.244.1.1")
	probe.Serve(t, b.NetNS, 8080)
	reach(t, a.NetNS, gw)
	reach(t, a.NetNS, b.IP())
	reach(t, b.NetNS, a.IP())
	reachTCP(t, a.NetNS, b.IP(), 8080)
	reach(t, n.NetNS, a.IP())
	if err := c.CheckPod(a); err != nil {
		t.Errorf("CHECK of a pod on a warm port: %v", err)
	}
	// The pool refills with new pairs.
	refilled := waitWarm(t, n, 2, taken...)

	// A podnet killed between an ADD and the labelling left pod a's port
	// unnamed: the next one names it again.
	for _, table := range []string{"Port", "Interface"} {
		n.OVS.Vsctl(t, "remove", table, taken[0], "external_ids", "switchyard.dev/pod", "switchyard.dev/container")
	}

	// The restarted podnet takes over the ready pairs the crashed one
	// left: a restart changes nothing on the switch. The pods keep their
	// pairs.
	old := pluginPids(t, n)
	if len(old) != 1 {
		t.Fatalf("want one plugin process under the agent, have %v", old)
	}
	if out, err := testenv.Run("kill", "-9", fmt.Sprint(old[0])); err != nil {
		t.Fatalf("killing podnet: %v %s", err, out)
	}
	err := testenv.Eventually("podnet restarted", 30*time.Second, 100*time.Millisecond, func() error {
		if now := pluginPids(t, n); len(now) != 1 || now[0] == old[0] {
			return fmt.Errorf("plugin processes %v", now)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = testenv.Eventually("podnet to take over its pool", 20*time.Second, 100*time.Millisecond, func() error {
		if !strings.Contains(agentOf(t, n).Log(), "took over the warm ports an earlier podnet left") {
			return fmt.Errorf("no take-over in the agent log yet")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rebuilt := waitWarm(t, n, 2, taken...)
	if !slices.Equal(rebuilt, refilled) {
		t.Errorf("warm ports after podnet restarted: %v, want the ones it left, %v", rebuilt, refilled)
	}
	relabelled := fmt.Sprintf(`"switchyard.dev/pod"="%s"`, a.Key())
	err = testenv.Eventually("the restarted podnet to name pod a on its warm port again", 10*time.Second, 50*time.Millisecond, func() error {
		for _, table := range []string{"Port", "Interface"} {
			if ids := n.OVS.Vsctl(t, "get", table, taken[0], "external_ids"); !strings.Contains(ids, relabelled) {
				return fmt.Errorf("%s %s external_ids %s, want %s", table, taken[0], strings.TrimSpace(ids), relabelled)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	reach(t, a.NetNS, b.IP())
	if err := c.CheckPod(b); err != nil {
		t.Errorf("CHECK of a pod on a warm port after podnet restarted: %v", err)
	}
	c.DeletePod(t, a)
	c.DeletePod(t, b)
	if diff := diffFootprint(before, withoutWarm(footprintOf(t, n), rebuilt)); diff != "" {
		t.Errorf("after DELs (-before +after):\n%s", diff)
	}

	// An ADD whose pod already holds the interface name fails with the
	// reason, and the warm pair it took goes with its rollback: no port,
	// veth, address or claim is left, and the pool refills.
	busy := createNetns(t, "busy")
	if out, err := netns.Exec(busy, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "busyp"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	list, err := loadList(n)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt := &libcni.RuntimeConf{ContainerID: testenv.RunID() + "-busy", NetNS: netns.Path(busy), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "busy"}}}
	if _, err := cniOf(n).AddNetworkList(ctx, list, rt); err == nil || !strings.Contains(err.Error(), "interface eth0 already exists") {
		t.Errorf("ADD into a netns that has an eth0: error %v, want one saying eth0 already exists", err)
	}
	refilled = waitWarm(t, n, 2, taken...)
	if diff := diffFootprint(before, withoutWarm(footprintOf(t, n), refilled)); diff != "" {
		t.Errorf("after the failed ADD (-before +after):\n%s", diff)
	}
	claims, _ := os.ReadDir(filepath.Join(n.Dir, "podnet", "warm-claims"))
	if len(claims) != 0 {
		t.Errorf("warm port claims left after every pod was deleted: %d", len(claims))
	}

	// Turning the pool off restarts podnet; the old one removes its ready
	// pairs as it stops.
	agentOf(t, n).SetConfig(t, "podnet", "warmPorts", 0)
	err = testenv.Eventually("the warm ports to go", 20*time.Second, 100*time.Millisecond, func() error {
		if left := n.OVS.Vsctl(t, "--columns=name", "--bare", "find", "Port", "external_ids:switchyard.dev/origin=warm-pool"); strings.TrimSpace(left) != "" {
			return fmt.Errorf("ports left: %s", left)
		}
		if out, _ := n.Exec("ip", "-o", "link", "show"); strings.Contains(out, warmPrefix) || strings.Contains(out, lowerPrefix) {
			return fmt.Errorf("veths left:\n%s", out)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	// And pods get ports of their own again.
	p := mustPod(t, c, n, "cold")
	if got := p.Result.Interfaces[0].Name; strings.HasPrefix(got, warmPrefix) {
		t.Errorf("with the pool off, pod got host interface %s", got)
	}
	reach(t, p.NetNS, gw)
}
