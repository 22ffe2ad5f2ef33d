package nodeagent_test

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// podnet's warm ports follow the pod MTU: when a plugin declaring an
// encapsulation overhead lowers it, the ready pairs made for the old MTU
// are replaced by pairs of the new one (the old veths go), so the next
// pod gets a warm port with the new MTU, while a pod already on a warm
// port keeps its own.
func TestWarmPortsFollowThePodMTU(t *testing.T) {
	o := startObserved(t, map[string]any{"warmPorts": 2}, nil)
	c, n, a, events, obsBin := o.c, o.n, o.a, o.events, o.obsBin
	old := readyWarm(t, n, 2, 1500)

	before := c.AddPod(t, cluster.PodSpec{Name: "before", Namespace: "demo", Node: n})
	if got := before.Result.Interfaces[0].Name; !slices.Contains(old, got) {
		t.Errorf("pod before the change got host interface %s, want a ready warm port of %v", got, old)
	}
	readyWarm(t, n, 2, 1500, before.Result.Interfaces[0].Name)

	a.Enable(t, observer(obsBin, "encap", 50, filepath.Join(n.Dir, "encap.jsonl"), false))
	waitLine(t, events, "the lowered pod MTU", func(l line) bool { return l.Kind == "facts" && l.PodMTU == 1450 })
	waitReadyz(t, a, 200, "ok")
	retuned := readyWarm(t, n, 2, 1450, before.Result.Interfaces[0].Name)
	for _, name := range old {
		if name == before.Result.Interfaces[0].Name {
			continue
		}
		if out, err := n.Exec("ip", "link", "show", name); err == nil {
			t.Errorf("warm pair %s of the old MTU is still there:\n%s", name, out)
		}
	}

	after := c.AddPod(t, cluster.PodSpec{Name: "after", Namespace: "demo", Node: n})
	if got := after.Result.Interfaces[0].Name; !slices.Contains(retuned, got) {
		t.Errorf("pod after the change got host interface %s, want a ready warm port of %v", got, retuned)
	}
	if got := linkMTU(t, after); got != 1450 {
		t.Errorf("pod after the change has MTU %d, want 1450", got)
	}
	if got := linkMTU(t, before); got != 1500 {
		t.Errorf("pod before the change has MTU %d, want its 1500 kept", got)
	}
	base := n.PodCIDR.IP.To4()
	gw := net.IPv4(base[0], base[1], base[2], base[3]+1).String()
	for _, p := range []*cluster.Pod{before, after} {
		if out, err := netns.Exec(p.NetNS, "ping", "-c", "1", "-W", "2", gw); err != nil {
			t.Errorf("%s -> gateway: %v\n%s", p.Key(), err, out)
		}
	}
}

// readyWarm waits until the node has want warm pairs ready (pool ports
// other than those taken), each of the given MTU, and returns their names.
func readyWarm(t *testing.T, n *cluster.Node, want, mtu int, taken ...string) []string {
	t.Helper()
	var names []string
	err := testenv.Eventually(fmt.Sprintf("%d warm ports of MTU %d", want, mtu), 30*time.Second, 50*time.Millisecond, func() error {
		out := n.OVS.Vsctl(t, "--bare", "--columns=name", "find", "Port", `external_ids:"switchyard.dev/origin"=warm-pool`)
		names = names[:0]
		for _, name := range strings.Fields(out) {
			if slices.Contains(taken, name) {
				continue
			}
			l, err := n.Exec("cat", "/sys/class/net/"+name+"/mtu")
			if err != nil {
				return fmt.Errorf("warm port %s: %v", name, err)
			}
			if strings.TrimSpace(l) != fmt.Sprint(mtu) {
				return fmt.Errorf("warm port %s has MTU %s", name, strings.TrimSpace(l))
			}
			names = append(names, name)
		}
		if len(names) != want {
			return fmt.Errorf("ready warm ports %v", names)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(names)
}
