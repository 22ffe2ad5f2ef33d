package cluster

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/ovs"
	"switchyard.dev/switchyard/itest/testenv"
)

// UnderlayCIDR is the node underlay. 198.18.0.0/15 is reserved for network
// benchmarking (RFC 2544), so it never clashes with a real network; it exists
// only inside the harness's own namespaces.
const UnderlayCIDR = "198.18.0.0/24"

// UnderlayCIDRv6 is the IPv6 side of the underlay (Options.UnderlayIPv6),
// a unique local prefix of the harness.
const UnderlayCIDRv6 = "fd00:198:18::/64"

// UnderlayIPv6 is the IPv6 underlay address of host (a node index, or an
// external host's number) in UnderlayCIDRv6.
func UnderlayIPv6(host int) net.IP {
	return net.ParseIP(fmt.Sprintf("fd00:198:18::%x", host))
}

// Options configures Start.
type Options struct {
	// Nodes is how many nodes to create (default 1).
	Nodes int
	// Client, if set, is used to register a Node object per node.
	Client kubernetes.Interface
	// DualStack also gives each node an IPv6 pod CIDR.
	DualStack bool
	// UnderlayIPv6 also puts an IPv6 address (UnderlayIPv6) on every
	// node's and external host's eth0, and lists the node's as its second
	// InternalIP, as dual-stack nodes have. The tunnel stays on IPv4.
	UnderlayIPv6 bool
	// StartAgent, if set, runs once per node after the node's namespace,
	// underlay and OVS are up and its Node object exists. It starts whatever
	// runs on the node (the Switchyard agent) and registers its cleanup on t.
	StartAgent func(t testenv.T, n *Node)
}

// Cluster is a running set of nodes on one underlay.
type Cluster struct {
	Fabric string // namespace holding the underlay bridge
	Nodes  []*Node
	client kubernetes.Interface
	opts   Options

	mu   sync.Mutex
	pods map[string]*Pod
}

// Node is one simulated Kubernetes node.
type Node struct {
	Index int
	// Name is the Kubernetes node name.
	Name string
	// NetNS is the node's network namespace: its "host network".
	NetNS string
	// UnderlayIP is the node's InternalIP, on its eth0.
	UnderlayIP net.IP
	// UnderlayIPv6 is its IPv6 one (Options.UnderlayIPv6 only).
	UnderlayIPv6 net.IP
	// PodCIDR and PodCIDRv6 (dual-stack only) are the node's pod ranges.
	PodCIDR, PodCIDRv6 *net.IPNet
	// OVS is the node's own ovsdb-server and ovs-vswitchd, with br-int.
	OVS *ovs.Switch
	// CNIConfDir and CNIBinDir are where the node's CNI config and plugins
	// live; the harness invokes CNI from them when it adds a pod here.
	CNIConfDir, CNIBinDir string
	// Dir is the node's scratch directory.
	Dir string
}

// Start creates the fabric and every node. Everything is removed on cleanup,
// in reverse order of creation.
func Start(t testenv.T, opts Options) *Cluster {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.LookPath(t, "ip", "iproute2")
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.Nodes > 200 {
		t.Fatalf("cluster.Start: %d nodes requested; the underlay %s holds at most 200", opts.Nodes, UnderlayCIDR)
	}
	c := &Cluster{client: opts.Client, opts: opts, pods: map[string]*Pod{}}
	c.Fabric = netns.Create(t, testenv.Name("fab"))
	run(t, "ip", "-n", c.Fabric, "link", "add", "fabric", "type", "bridge")
	run(t, "ip", "-n", c.Fabric, "link", "set", "fabric", "up")

	for i := 1; i <= opts.Nodes; i++ {
		n := c.addNode(t, i, opts)
		c.Nodes = append(c.Nodes, n)
	}
	if opts.StartAgent != nil {
		for _, n := range c.Nodes {
			opts.StartAgent(t, n)
		}
	}
	return c
}

// AddNode adds one more node at runtime (the next index), with its Node
// object and, if the cluster has StartAgent, its agent: a node joining a
// running cluster.
func (c *Cluster) AddNode(t testenv.T) *Node {
	t.Helper()
	n := c.addNode(t, len(c.Nodes)+1, c.opts)
	c.mu.Lock()
	c.Nodes = append(c.Nodes, n)
	c.mu.Unlock()
	if c.opts.StartAgent != nil {
		c.opts.StartAgent(t, n)
	}
	return n
}

// AddExternal creates a host on the underlay that is not a node: a
// namespace on the fabric holding 198.18.0.<host>/24 (pick host above the
// node indexes, below 255). It is removed on cleanup.
func (c *Cluster) AddExternal(t testenv.T, host int) (ns string, ip net.IP) {
	t.Helper()
	ip = net.IPv4(198, 18, 0, byte(host)).To4()
	ns = netns.Create(t, testenv.Name(fmt.Sprintf("ext%d", host)))
	port := fmt.Sprintf("x%d", host)
	run(t, "ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", c.Fabric)
	run(t, "ip", "-n", c.Fabric, "link", "set", port, "master", "fabric", "up")
	run(t, "ip", "-n", ns, "addr", "add", ip.String()+"/24", "dev", "eth0")
	if c.opts.UnderlayIPv6 {
		run(t, "ip", "-n", ns, "addr", "add", UnderlayIPv6(host).String()+"/64", "dev", "eth0", "nodad")
	}
	run(t, "ip", "-n", ns, "link", "set", "eth0", "up")
	return ns, ip
}

// DeleteNodeObject deletes the node's Node object, as `kubectl delete
// node` would; its namespace and processes stay until cleanup.
func (c *Cluster) DeleteNodeObject(t testenv.T, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting Node %s: %v", n.Name, err)
	}
}

func (c *Cluster) addNode(t testenv.T, i int, opts Options) *Node {
	t.Helper()
	n := &Node{
		Index:      i,
		Name:       fmt.Sprintf("node-%d", i),
		UnderlayIP: net.IPv4(198, 18, 0, byte(i)).To4(),
		PodCIDR:    &net.IPNet{IP: net.IPv4(10, 244, byte(i), 0).To4(), Mask: net.CIDRMask(24, 32)},
	}
	if opts.DualStack {
		ip := net.ParseIP(fmt.Sprintf("fd00:10:244:%x::", i))
		n.PodCIDRv6 = &net.IPNet{IP: ip, Mask: net.CIDRMask(64, 128)}
	}
	n.NetNS = netns.Create(t, testenv.Name(fmt.Sprintf("n%d", i)))
	n.Dir = testenv.Dir(t, fmt.Sprintf("n%d", i))
	n.CNIConfDir = n.Dir + "/cni/net.d"
	n.CNIBinDir = n.Dir + "/cni/bin"

	// The veth is created with each end directly in its namespace, so its
	// names only need to be unique inside those namespaces.
	port := fmt.Sprintf("n%d", i)
	run(t, "ip", "link", "add", "eth0", "netns", n.NetNS, "type", "veth", "peer", "name", port, "netns", c.Fabric)
	run(t, "ip", "-n", c.Fabric, "link", "set", port, "master", "fabric", "up")
	run(t, "ip", "-n", n.NetNS, "addr", "add", n.UnderlayIP.String()+"/24", "dev", "eth0")
	if opts.UnderlayIPv6 {
		n.UnderlayIPv6 = UnderlayIPv6(i)
		run(t, "ip", "-n", n.NetNS, "addr", "add", n.UnderlayIPv6.String()+"/64", "dev", "eth0", "nodad")
	}
	run(t, "ip", "-n", n.NetNS, "link", "set", "eth0", "up")

	n.OVS = ovs.Start(t, ovs.Options{Name: fmt.Sprintf("n%d-ovs", i), NetNS: n.NetNS})
	n.OVS.AddBridge(t, "br-int")

	if c.client != nil {
		c.registerNode(t, n)
	}
	return n
}

func (c *Cluster) registerNode(t testenv.T, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cidrs := []string{n.PodCIDR.String()}
	if n.PodCIDRv6 != nil {
		cidrs = append(cidrs, n.PodCIDRv6.String())
	}
	obj := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{"kubernetes.io/hostname": n.Name}},
		Spec:       corev1.NodeSpec{PodCIDR: cidrs[0], PodCIDRs: cidrs},
	}
	created, err := c.client.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Node %s: %v", n.Name, err)
	}
	created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.UnderlayIP.String()}}
	if n.UnderlayIPv6 != nil {
		created.Status.Addresses = append(created.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.UnderlayIPv6.String()})
	}
	created.Status.Addresses = append(created.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
	created.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "HarnessNode",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	if _, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting status of Node %s: %v", n.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	})
}

// Exec runs a command inside the node's namespace.
func (n *Node) Exec(args ...string) (string, error) { return netns.Exec(n.NetNS, args...) }

// Node returns the node with the given Kubernetes name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func run(t testenv.T, name string, args ...string) string {
	t.Helper()
	out, err := testenv.Run(name, args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return strings.TrimSpace(out)
}

// StartProcess runs a program inside the node's namespace (as the agent and
// its plugins run on a real node's host network), logging to the node's
// directory, and stops it on cleanup.
func (n *Node) StartProcess(t testenv.T, name, path string, args []string, env ...string) *testenv.Process {
	t.Helper()
	p, err := testenv.StartProcess(testenv.ProcessSpec{Name: name, Path: path, Args: args, Env: env, NetNS: n.NetNS, Dir: n.Dir})
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	t.Cleanup(func() { p.Stop(10 * time.Second) })
	return p
}
