// Command demo brings up a local multi-node Switchyard cluster on this
// machine and prints what works: the control plane, the nodes with their
// OVS bridges, and a connectivity table. It is what `make demo` runs.
//
// With -hold it keeps the cluster up until Ctrl-C, printing how to reach it.
// With -kubelet (make demo-kubelet) the nodes are real kubelets with
// containerd instead, and pods are created through the apiserver.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"switchyard.dev/switchyard/itest/build"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

func main() {
	nodes := flag.Int("nodes", 3, "number of nodes")
	hold := flag.Bool("hold", false, "keep the cluster running until Ctrl-C")
	kubelet := flag.Bool("kubelet", false, "run real kubelet + containerd nodes (make demo-kubelet); -nodes defaults to 2 then")
	flag.Parse()

	r := testenv.NewRunner()
	defer r.Close()
	testenv.RequireRoot(r)

	if *kubelet {
		n := *nodes
		if !isFlagSet("nodes") {
			n = 2
		}
		ok := runKubelet(r, n, *hold)
		r.Close()
		if !ok {
			fmt.Fprintln(os.Stderr, "demo: connectivity differs from what was expected")
			os.Exit(1)
		}
		fmt.Println("demo: everything torn down.")
		return
	}

	step := func(what string, f func()) {
		start := time.Now()
		fmt.Printf("==> %s\n", what)
		f()
		fmt.Printf("    done in %s\n", time.Since(start).Round(10*time.Millisecond))
	}

	var cp *controlplane.ControlPlane
	step("starting etcd and kube-apiserver v1.37.2", func() { cp = controlplane.Start(r) })
	fmt.Printf("    apiserver %s, kubeconfig %s\n", cp.URL, cp.Kubeconfig)

	var bins map[string]string
	step("building switchyard-agent, switchyard-cni and the podnet, tunnel, service and netpol plugins", func() {
		bins = build.Commands(r, "host/cmd/switchyard-agent", "cni/cmd/switchyard-cni", "plugins/podnet", "plugins/tunnel", "plugins/service", "plugins/netpol")
	})
	nb := nodeagent.Binaries{Agent: bins["switchyard-agent"], CNI: bins["switchyard-cni"],
		Plugins: map[string]string{"podnet": bins["podnet"], "tunnel": bins["tunnel"], "service": bins["service"], "netpol": bins["netpol"]}}

	var ctrlAddr string
	step("starting switchyard-controller (policy computation and per-node streams)", func() { ctrlAddr = startController(r, cp) })

	var c *cluster.Cluster
	step(fmt.Sprintf("bringing up %d nodes (netns + ovsdb-server + ovs-vswitchd on the userspace datapath + switchyard-agent with podnet, tunnel, service and netpol, joined to the apiserver with its pod-bound ServiceAccount token; the agent moves the node IP onto br-phy for the userspace tunnel)", *nodes), func() {
		c = cluster.Start(r, cluster.Options{Nodes: *nodes, Client: cp.Client, StartAgent: func(t testenv.T, n *cluster.Node) {
			cfg := netpolConfig()
			cfg["service"] = map[string]any{"serviceCIDRs": []string{controlplane.ServiceCIDR}}
			nodeagent.Start(t, n, nodeagent.Options{Bins: nb, ControlPlane: cp, Enabled: []string{"podnet", "tunnel", "service", "netpol"},
				Controller: ctrlAddr, Config: cfg})
		}})
	})
	fmt.Println()
	fmt.Printf("%-8s %-22s %-14s %-14s %-22s %s\n", "NODE", "NAMESPACE", "UNDERLAY IP", "POD CIDR", "br-int", "tunnel port")
	for _, n := range c.Nodes {
		dp := strings.TrimSpace(n.OVS.Vsctl(r, "get", "bridge", "br-int", "datapath_type"))
		tun := strings.TrimSpace(n.OVS.Vsctl(r, "get", "interface", "sy-tun0", "type"))
		fmt.Printf("%-8s %-22s %-14s %-14s datapath_type=%-8s sy-tun0 type=%s\n", n.Name, n.NetNS, n.UnderlayIP, n.PodCIDR, dp, tun)
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

	var pods []*cluster.Pod
	step(fmt.Sprintf("creating %d pods through CNI (kubelet's part done by the harness)", 2**nodes), func() {
		for _, n := range c.Nodes {
			for _, name := range []string{"a", "b"} {
				pods = append(pods, c.AddPod(r, cluster.PodSpec{Name: fmt.Sprintf("%s-%d", name, n.Index), Namespace: "demo", Node: n,
					Labels: map[string]string{"app": name, "node": n.Name}}))
			}
		}
	})
	fmt.Println()
	fmt.Printf("%-14s %-8s %-14s %s\n", "POD", "NODE", "IP", "NETNS")
	var podEps, srcEps []probe.Endpoint
	for _, p := range pods {
		fmt.Printf("%-14s %-8s %-14s %s\n", p.Key(), p.Node.Name, p.IP(), p.NetNS)
		ep := probe.Endpoint{Name: p.Name, NetNS: p.NetNS, IP: p.IP()}
		podEps = append(podEps, ep)
		srcEps = append(srcEps, ep)
		probe.Serve(r, p.NetNS, 8080)
	}
	for _, n := range c.Nodes {
		srcEps = append(srcEps, probe.Endpoint{Name: n.Name, NetNS: n.NetNS, IP: n.UnderlayIP})
	}
	// Same-node traffic (pod to pod, node to its own pods) is podnet's
	// job, cross-node traffic (pod to remote pod, node to remote pod) the
	// tunnel plugin's: every cell is expected ok.
	expect := probe.Expect(srcEps, podEps, true, true)
	fmt.Println()
	for _, proto := range []probe.Protocol{probe.ICMP, probe.TCP, probe.UDP, probe.SCTP} {
		m := probe.Run(srcEps, podEps, proto, 8080, probe.MatrixOptions{SkipSelf: true, Timeout: 2 * time.Second})
		fmt.Printf("pod connectivity, %s (rows: from, columns: to):\n%s\n", proto, m)
		if d := m.Diff(expect); d != "" {
			ok = false
			fmt.Printf("UNEXPECTED (got!want):\n%s\n", d)
		}
	}
	fmt.Println("Same-node pod traffic flows through br-int; cross-node pod traffic through the Geneve tunnel (tunnel plugin).")

	if !showService(r, cp, pods, srcEps) {
		ok = false
	}

	if !showPolicies(r, cp, c, ctrlAddr, pods) {
		ok = false
	}

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

func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
