package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/realnode"
	"switchyard.dev/switchyard/itest/testenv"
)

// runKubelet is `make demo-kubelet`: real kubelet + containerd nodes,
// Switchyard installed from our images and switchyard.yml, pods created
// through the apiserver and networked by our CNI (called by containerd),
// shown as `kubectl get nodes,pods -o wide` would, then the pod-to-pod
// matrix from real client pods.
func runKubelet(r *testenv.Runner, nodes int, hold bool) bool {
	step := func(what string, f func()) {
		start := time.Now()
		fmt.Printf("==> %s\n", what)
		f()
		fmt.Printf("    done in %s\n", time.Since(start).Round(10*time.Millisecond))
	}
	var images []string
	step("building the switchyard-agent, switchyard-ovs and switchyard-controller images (make images; SWITCHYARD_IMAGE_DIR reuses built ones)", func() {
		images = realnode.ProductImages(r)
	})
	defer realnode.RemoveBuiltImages()
	var c *realnode.Cluster
	step(fmt.Sprintf("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and %d nodes (containerd %s + kubelet %s each, in their own network, mount and cgroup namespaces)", nodes, "v2.4.2", "v1.37.2"), func() {
		c = realnode.Start(r, realnode.Options{Nodes: nodes, Images: images})
	})
	fmt.Println("\nNo CNI yet, so the nodes are NotReady:")
	printNodes(c)
	step("applying manifests/switchyard.yml as shipped (its underlay finds each node's uplink); install-cni drops the conflist", func() {
		c.Apply(r, realnode.Manifest(r))
		if err := c.WaitSystemReady("kube-system", 180*time.Second); err != nil {
			r.Fatalf("%v\n%s", err, c.Describe("kube-system", 10))
		}
		for _, n := range c.Nodes {
			if err := c.WaitNode(n.Name, realnode.Ready(true), 60*time.Second); err != nil {
				r.Fatalf("%v", err)
			}
		}
	})
	var servers []*corev1.Pod
	step("creating an agnhost netexec pod on every node", func() {
		for _, n := range c.Nodes {
			name := "netexec-" + n.Name
			c.CreatePod(r, "default", realnode.AgnhostPod(name, n.Name, corev1.RestartPolicyAlways, "netexec", "--http-port=8080"))
		}
		for _, n := range c.Nodes {
			p, err := c.WaitPod("default", "netexec-"+n.Name, realnode.Running, 90*time.Second)
			if err != nil {
				r.Fatalf("%v", err)
			}
			servers = append(servers, p)
		}
	})
	printNodes(c)
	printPods(c)
	var m *realnode.Matrix
	step("probing pod to pod with agnhost connect client pods on every node", func() {
		m = c.Connectivity(r, "default", servers, 8080)
	})
	fmt.Printf("\npod connectivity, TCP 8080 (rows: client pod's node, columns: server pod):\n%s\n", m)
	ok := m.Failures() == ""
	if !ok {
		fmt.Printf("UNEXPECTED:\n%s\n", m.Failures())
	}
	if hold {
		fmt.Printf("\nCluster is up. Try:\n  KUBECONFIG=%s kubectl get nodes,pods -o wide   (if kubectl is installed)\nCtrl-C to tear down.\n", c.CP.Kubeconfig)
		select {}
	}
	return ok
}

func age(t metav1.Time) string {
	return time.Since(t.Time).Round(time.Second).String()
}

func printNodes(c *realnode.Cluster) {
	nodes, err := c.CP.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		fmt.Printf("listing nodes: %v\n", err)
		return
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
	fmt.Println()
	fmt.Fprintln(w, "NAME\tSTATUS\tAGE\tVERSION\tINTERNAL-IP\tPOD-CIDR\tOS-IMAGE\tCONTAINER-RUNTIME")
	for _, n := range nodes.Items {
		status := "NotReady"
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				status = "Ready"
			}
		}
		ip := ""
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		fmt.Fprintf(w, "node/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, status, age(n.CreationTimestamp), n.Status.NodeInfo.KubeletVersion,
			ip, n.Spec.PodCIDR, n.Status.NodeInfo.OSImage, n.Status.NodeInfo.ContainerRuntimeVersion)
	}
	w.Flush()
	fmt.Println()
}

func printPods(c *realnode.Cluster) {
	pods, err := c.CP.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		fmt.Printf("listing pods: %v\n", err)
		return
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		return pods.Items[i].Namespace+pods.Items[i].Name < pods.Items[j].Namespace+pods.Items[j].Name
	})
	w := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tNAME\tREADY\tSTATUS\tRESTARTS\tAGE\tIP\tNODE")
	for _, p := range pods.Items {
		ready, restarts := 0, int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Ready {
				ready++
			}
			restarts += cs.RestartCount
		}
		fmt.Fprintf(w, "%s\tpod/%s\t%d/%d\t%s\t%d\t%s\t%s\t%s\n", p.Namespace, p.Name, ready, len(p.Spec.Containers),
			strings.TrimSpace(string(p.Status.Phase)), restarts, age(p.CreationTimestamp), p.Status.PodIP, p.Spec.NodeName)
	}
	w.Flush()
}
