package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/itest/upstream"
)

// ClusterCIDR is what kube-controller-manager carves node pod CIDRs from
// (/24 each, in order of registration).
const ClusterCIDR = "10.244.0.0/16"

// APIAddress is where nodes reach the apiserver: an address on the fabric
// bridge, forwarded to the apiserver's loopback port. It is also the
// default/kubernetes Service's endpoint.
var APIAddress = net.IPv4(198, 18, 0, 254).To4()

// KubernetesServiceIP is the default/kubernetes Service's ClusterIP (the
// first address of controlplane.ServiceCIDR).
var KubernetesServiceIP = net.IPv4(10, 96, 0, 1).To4()

// Options configures Start.
type Options struct {
	// Nodes is how many nodes to start (default 2).
	Nodes int
	// Images are extra image archives (docker-archive or OCI tarballs)
	// imported on every node besides pause and agnhost.
	Images []string
}

// Cluster is a running control plane with real nodes.
type Cluster struct {
	CP     *controlplane.ControlPlane
	Fabric string
	Nodes  []*Node
	// NodeKubeconfig is the admin kubeconfig that names APIAddress, for
	// processes inside the node namespaces.
	NodeKubeconfig string
	// Images are the archives imported on every node.
	Images []string
	// KubeBin and ContainerdBin hold the upstream binaries.
	KubeBin, ContainerdBin string
	Dir                    string

	runc string
}

// Start brings up the control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) and opts.Nodes nodes, each with
// its containerd and kubelet, and waits until every node has registered.
// No CNI is installed: the nodes are NotReady until one is.
func Start(t testenv.T, opts Options) *Cluster {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.LookPath(t, "ip", "iproute2")
	testenv.LookPath(t, "nsenter", "util-linux")
	testenv.LookPath(t, "unshare", "util-linux")
	if opts.Nodes <= 0 {
		opts.Nodes = 2
	}
	c := &Cluster{runc: testenv.LookPath(t, "runc", "runc"), Dir: testenv.Dir(t, "rn")}
	toolsDir, err := testenv.SourceDir("tools")
	if err != nil {
		t.Fatalf("%v", err)
	}
	if c.KubeBin, err = upstream.EnsureGroup(toolsDir, upstream.Kube, t.Logf); err != nil {
		t.Fatalf("%v", err)
	}
	if c.ContainerdBin, err = upstream.EnsureContainerd(t.Logf); err != nil {
		t.Fatalf("%v", err)
	}
	c.buildImages(t, opts.Images)
	c.start(t, opts)
	return c
}

// buildImages builds the pause image and packs agnhost; extra archives
// are imported as they are.
func (c *Cluster) buildImages(t testenv.T, extra []string) {
	t.Helper()
	moduleDir, err := testenv.SourceDir("..")
	if err != nil {
		t.Fatalf("%v", err)
	}
	pause, err := BuildPause(moduleDir, c.Dir)
	if err != nil {
		t.Fatalf("%v", err)
	}
	agnhost, err := PackAgnhost(filepath.Join(c.KubeBin, "agnhost"), c.Dir)
	if err != nil {
		t.Fatalf("packing agnhost: %v", err)
	}
	c.Images = append([]string{pause, agnhost}, extra...)
}

// start brings up the fabric, the control plane and the nodes.
func (c *Cluster) start(t testenv.T, opts Options) {
	t.Helper()
	c.Fabric = netns.Create(t, testenv.Name("rfab"))
	run(t, "ip", "-n", c.Fabric, "link", "add", "fabric", "type", "bridge")
	run(t, "ip", "-n", c.Fabric, "addr", "add", APIAddress.String()+"/24", "dev", "fabric")
	run(t, "ip", "-n", c.Fabric, "link", "set", "fabric", "up")

	// The apiserver reaches kubelets (pods/exec, pods/log) through the
	// fabric: see startKubeletProxy.
	c.CP = controlplane.StartWithOptions(t, controlplane.Options{AdvertiseAddress: APIAddress, ServiceAccounts: true,
		ExtraArgs: startKubeletProxy(t, c.Dir, c.Fabric)})
	apiPort := c.CP.Port
	cluster.Forward(t, c.Fabric, fmt.Sprintf("%s:%d", APIAddress, apiPort), fmt.Sprintf("127.0.0.1:%d", apiPort))
	// The kubernetes Service's ClusterIP is also answered on the fabric,
	// as a load balancer in front of the apiserver would: kubelet gives
	// every pod, hostNetwork ones included, KUBERNETES_SERVICE_HOST=
	// 10.96.0.1, and before a CNI with a service proxy runs on the node
	// nothing else would answer it. Nodes route it to the fabric.
	run(t, "ip", "-n", c.Fabric, "addr", "add", KubernetesServiceIP.String()+"/32", "dev", "fabric")
	cluster.Forward(t, c.Fabric, KubernetesServiceIP.String()+":443", fmt.Sprintf("127.0.0.1:%d", apiPort))
	c.NodeKubeconfig = filepath.Join(c.Dir, "node-kubeconfig")
	if err := writeKubeconfig(c.NodeKubeconfig, fmt.Sprintf("https://%s:%d", APIAddress, apiPort), c.CP); err != nil {
		t.Fatalf("%v", err)
	}
	c.startControllers(t)

	for i := 1; i <= opts.Nodes; i++ {
		c.Nodes = append(c.Nodes, c.startNode(t, i))
	}
	for _, n := range c.Nodes {
		if err := c.WaitNode(n.Name, func(*corev1.Node) error { return nil }, 90*time.Second); err != nil {
			t.Fatalf("node %s did not register: %v\nkubelet log:\n%s", n.Name, err, n.kubelet.Tail(30))
		}
	}
}

// startControllers runs kube-controller-manager (node CIDRs, service-account
// tokens and root CA, EndpointSlices, DaemonSets, Deployments, garbage
// collection) and kube-scheduler, both on the loopback admin kubeconfig.
func (c *Cluster) startControllers(t testenv.T) {
	t.Helper()
	kcm := c.startProcess(t, testenv.ProcessSpec{
		Name: "kube-controller-manager", Path: filepath.Join(c.KubeBin, "kube-controller-manager"), Dir: c.Dir,
		Args: []string{
			"--kubeconfig=" + c.CP.Kubeconfig,
			"--authentication-kubeconfig=" + c.CP.Kubeconfig, "--authorization-kubeconfig=" + c.CP.Kubeconfig,
			"--bind-address=127.0.0.1", "--secure-port=0",
			"--leader-elect=false",
			"--allocate-node-cidrs=true", "--cluster-cidr=" + ClusterCIDR, "--node-cidr-mask-size=24",
			"--service-cluster-ip-range=" + controlplane.ServiceCIDR,
			"--service-account-private-key-file=" + c.CP.ServiceAccountKeyFile,
			"--root-ca-file=" + c.CP.CAFile,
			"--use-service-account-credentials=false",
			"--controllers=*",
			"--v=1",
		},
	})
	sched := c.startProcess(t, testenv.ProcessSpec{
		Name: "kube-scheduler", Path: filepath.Join(c.KubeBin, "kube-scheduler"), Dir: c.Dir,
		Args: []string{
			"--kubeconfig=" + c.CP.Kubeconfig,
			"--authentication-kubeconfig=" + c.CP.Kubeconfig, "--authorization-kubeconfig=" + c.CP.Kubeconfig,
			"--bind-address=127.0.0.1", "--secure-port=0",
			"--leader-elect=false", "--v=1",
		},
	})
	// The default ServiceAccount appearing proves the controller-manager
	// runs; pods cannot be admitted before it exists.
	err := testenv.Eventually("default ServiceAccount in namespace default", 60*time.Second, 200*time.Millisecond, func() error {
		for _, p := range []*testenv.Process{kcm, sched} {
			if p.Exited() {
				return testenv.Permanent(fmt.Errorf("%s exited:\n%s", p.Name, p.Tail(30)))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.CP.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
}

func (c *Cluster) startProcess(t testenv.T, spec testenv.ProcessSpec) *testenv.Process {
	t.Helper()
	p, err := testenv.StartProcess(spec)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	return p
}

// WaitNode polls the Node object until cond accepts it.
func (c *Cluster) WaitNode(name string, cond func(*corev1.Node) error, timeout time.Duration) error {
	return testenv.Eventually("node "+name, timeout, 250*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := c.CP.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return cond(n)
	})
}

// Ready is a WaitNode condition: the node's Ready condition is want. The
// error names the kubelet's reason, e.g. "container runtime network not
// ready: NetworkReady=false reason:NetworkPluginNotReady ...".
func Ready(want bool) func(*corev1.Node) error {
	return func(n *corev1.Node) error {
		for _, cond := range n.Status.Conditions {
			if cond.Type != corev1.NodeReady {
				continue
			}
			if (cond.Status == corev1.ConditionTrue) == want {
				return nil
			}
			return fmt.Errorf("Ready=%s (%s: %s)", cond.Status, cond.Reason, cond.Message)
		}
		return fmt.Errorf("no Ready condition yet")
	}
}

func writeKubeconfig(path, server string, cp *controlplane.ControlPlane) error {
	ca, err := os.ReadFile(cp.CAFile)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["itest"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cp.Config.BearerToken}
	cfg.Contexts["itest"] = &clientcmdapi.Context{Cluster: "itest", AuthInfo: "admin"}
	cfg.CurrentContext = "itest"
	return clientcmd.WriteToFile(*cfg, path)
}

func run(t testenv.T, name string, args ...string) string {
	t.Helper()
	out, err := testenv.Run(name, args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return strings.TrimSpace(out)
}
