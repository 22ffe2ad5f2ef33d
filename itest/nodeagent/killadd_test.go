package nodeagent_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/build"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/testenv"
)

// An agent killed (SIGKILL) in the middle of a CNI ADD leaves nothing that
// survives its next start and a CNI GC that no longer lists the pod: no
// veth, no OVS port, no address, no flow. An ADD the host never recorded
// is gone after the start alone. The kill lands at several points
// of the ADD (before podnet ran, while it wires the pod, after it answered).
func TestAgentKilledMidADDLeavesNothing(t *testing.T) {
	bins := build.Commands(t, "host/cmd/switchyard-agent", "cni/cmd/switchyard-cni", "plugins/podnet")
	cp := controlplane.Start(t)
	nb := nodeagent.Binaries{Agent: bins["switchyard-agent"], CNI: bins["switchyard-cni"], Plugins: map[string]string{"podnet": bins["podnet"]}}
	var agent *nodeagent.Agent
	c := cluster.Start(t, cluster.Options{Nodes: 1, Client: cp.Client, StartAgent: func(t testenv.T, n *cluster.Node) {
		agent = nodeagent.Start(t, n, nodeagent.Options{Bins: nb, ControlPlane: cp})
	}})
	n := c.Nodes[0]
	// A pod that stays: GC must leave it alone.
	keep := c.AddPod(t, cluster.PodSpec{Name: "keep", Namespace: "demo", Node: n})
	baseline := snapshot(t, n)

	unrecorded := 0
	for i, delay := range []time.Duration{0, 10 * time.Millisecond, 25 * time.Millisecond, 60 * time.Millisecond, 150 * time.Millisecond} {
		name := fmt.Sprintf("cut-%d", i)
		done := make(chan error, 1)
		go func() {
			_, err := c.TryAddPod(t, cluster.PodSpec{Name: name, Namespace: "demo", Node: n})
			done <- err
		}()
		time.Sleep(delay)
		agent.Process.Kill()
		addErr := <-done
		agent.Run(t)
		// Unless the host recorded the attachment before the kill (then
		// it stays until the runtime's GC), the start alone removes what
		// the ADD left: podnet reconciles IPAM with the host's records.
		records, err := os.ReadFile(filepath.Join(agent.Dir, "run", "interfaces.json"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if !strings.Contains(string(records), fmt.Sprintf("%s-demo-%s", testenv.RunID(), name)) {
			unrecorded++
			err := testenv.Eventually("the node to hold what it held before the cut ADD, without a GC", 10*time.Second, 100*time.Millisecond, func() error {
				if got := snapshot(t, n); got != baseline {
					return fmt.Errorf("the node holds\n%s\nwant\n%s", got, baseline)
				}
				return nil
			})
			if err != nil {
				t.Errorf("kill %v into the ADD of %s (ADD: %v), unrecorded by the host: after the restart %v\nagent log:\n%s", delay, name, addErr, err, agent.Process.Tail(30))
			}
		}
		if err := n.GC([]*cluster.Pod{keep}); err != nil {
			t.Fatalf("kill %v into the ADD of %s (ADD: %v): CNI GC: %v\nagent log:\n%s", delay, name, addErr, err, agent.Process.Tail(30))
		}
		if got := snapshot(t, n); got != baseline {
			t.Errorf("kill %v into the ADD of %s (ADD: %v): after restart and GC the node holds\n%s\nwant what it held before the ADD:\n%s", delay, name, addErr, got, baseline)
		}
	}
	if unrecorded == 0 {
		t.Error("no kill landed before the host recorded the ADD, so the restart's own clean-up went untested")
	}
	// The pod that stayed still works, with its address kept.
	if err := c.CheckPod(keep); err != nil {
		t.Errorf("CNI CHECK of the pod GC had to keep: %v", err)
	}
}

// snapshot is what the node holds for pods: host-side veths, OVS ports,
// allocated addresses and the number of flows on br-int.
func snapshot(t *testing.T, n *cluster.Node) string {
	t.Helper()
	links, err := n.Exec("ip", "-o", "link", "show", "type", "veth")
	if err != nil {
		t.Fatalf("%v", err)
	}
	var veths []string
	for _, l := range strings.Split(strings.TrimSpace(links), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] != "eth0@if" && !strings.HasPrefix(f[1], "eth0") {
			veths = append(veths, strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
		}
	}
	ports := strings.Fields(n.OVS.Vsctl(t, "list-ports", "br-int"))
	var ips []string
	err = filepath.WalkDir(filepath.Join(n.Dir, "podnet"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if _, perr := netip.ParseAddr(d.Name()); perr == nil {
				ips = append(ips, d.Name())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	flows := len(strings.Split(strings.TrimSpace(n.OVS.Ofctl(t, "--no-stats", "dump-flows", "br-int")), "\n"))
	return fmt.Sprintf("veths %v\nports %v\naddresses %v\nflows %d", veths, ports, ips, flows)
}
