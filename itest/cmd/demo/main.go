// Command demo brings up a local multi-node Switchyard cluster on this
// machine and prints what works: the control plane, the nodes with their
// OVS bridges, and a connectivity table. It is what `make demo` runs.
//
// With -hold it keeps the cluster up until Ctrl-C, printing how to reach it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

func main() {
	nodes := flag.Int("nodes", 3, "number of nodes")
	hold := flag.Bool("hold", false, "keep the cluster running until Ctrl-C")
	flag.Parse()

	r := testenv.NewRunner()
	defer r.Close()
	testenv.RequireRoot(r)

	step := func(what string, f func()) {
		start := time.Now()
		fmt.Printf("==> %s\n", what)
		f()
		fmt.Printf("    done in %s\n", time.Since(start).Round(10*time.Millisecond))
	}

	var cp *controlplane.ControlPlane
	step("starting etcd and kube-apiserver v1.37.2", func() { cp = controlplane.Start(r) })
	fmt.Printf("    apiserver %s, kubeconfig %s\n", cp.URL, cp.Kubeconfig)

	var c *cluster.Cluster
	step(fmt.Sprintf("bringing up %d nodes (netns + ovsdb-server + ovs-vswitchd, userspace datapath)", *nodes), func() {
		c = cluster.Start(r, cluster.Options{Nodes: *nodes, Client: cp.Client})
	})
	fmt.Println()
	fmt.Printf("%-8s %-22s %-14s %-14s %s\n", "NODE", "NAMESPACE", "UNDERLAY IP", "POD CIDR", "br-int")
	for _, n := range c.Nodes {
		dp := strings.TrimSpace(n.OVS.Vsctl(r, "get", "bridge", "br-int", "datapath_type"))
		fmt.Printf("%-8s %-22s %-14s %-14s datapath_type=%s\n", n.Name, n.NetNS, n.UnderlayIP, n.PodCIDR, dp)
	}

	var eps []probe.Endpoint
	for _, n := range c.Nodes {
		eps = append(eps, probe.Endpoint{Name: n.Name, NetNS: n.NetNS, IP: n.UnderlayIP})
		probe.Serve(r, n.NetNS, 8080)
	}
	fmt.Println()
	ok := true
	for _, proto := range []probe.Protocol{probe.ICMP, probe.TCP, probe.UDP, probe.SCTP} {
		m := probe.Run(eps, eps, proto, 8080, probe.MatrixOptions{SkipSelf: true})
		fmt.Printf("underlay connectivity, %s (ok = reachable):\n%s\n", proto, m)
		if d := m.Diff(probe.Expect(eps, eps, true, true)); d != "" {
			ok = false
			fmt.Printf("UNEXPECTED (got!want):\n%s\n", d)
		}
	}
	fmt.Println("Not yet in this demo: the Switchyard agent, pods via CNI, and policies (they land with the agent, CNI and policy issues).")

	if *hold {
		fmt.Printf("\nCluster is up. Try:\n  KUBECONFIG=%s kubectl get nodes   (if kubectl is installed)\n  ip netns exec %s ping %s\nCtrl-C to tear down.\n", cp.Kubeconfig, c.Nodes[0].NetNS, c.Nodes[len(c.Nodes)-1].UnderlayIP)
		select {}
	}
	r.Close()
	if !ok {
		fmt.Fprintln(os.Stderr, "demo: connectivity differs from what was expected")
		os.Exit(1)
	}
	fmt.Println("demo: everything torn down.")
}
