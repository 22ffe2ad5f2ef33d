package realnode

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/itest/upstream"
)

// Node is one real node: a network namespace with its own containerd and
// kubelet, running inside a mount namespace of its own.
type Node struct {
	Index int
	// Name is the Kubernetes node name the kubelet registers.
	Name string
	// NetNS is the node's network namespace (its host network).
	NetNS string
	// IP is the node's InternalIP on its eth0, on the fabric.
	IP net.IP
	// Dir is the node's directory: configs, logs, containerd's root and
	// state, and the private directories behind HostPaths.
	Dir string
	// Socket is containerd's address, reachable from the host.
	Socket string
	// CgroupRoot is the kubelet's cgroupRoot (without the leading slash).
	CgroupRoot string

	mnt                 *mountNS
	containerd, kubelet *testenv.Process
	cluster             *Cluster
}

// Private returns the host-visible directory that is hostPath inside the
// node (one of HostPaths), e.g. Private("/etc/cni/net.d").
func (n *Node) Private(hostPath string) string {
	d, ok := n.mnt.Private[hostPath]
	if !ok {
		panic("realnode: " + hostPath + " is not one of HostPaths")
	}
	return d
}

// ContainerdLog and KubeletLog return the tail of each daemon's log.
func (n *Node) ContainerdLog(lines int) string { return n.containerd.Tail(lines) }
func (n *Node) KubeletLog(lines int) string    { return n.kubelet.Tail(lines) }

func (c *Cluster) startNode(t testenv.T, i int) *Node {
	t.Helper()
	role := fmt.Sprintf("k%d", i)
	n := &Node{
		Index: i, Name: fmt.Sprintf("node-%d", i), IP: net.IPv4(198, 18, 0, byte(i)).To4(),
		CgroupRoot: testenv.Name(role), cluster: c,
	}
	n.NetNS = netns.Create(t, testenv.Name(role))
	n.Dir = testenv.Dir(t, role)
	port := fmt.Sprintf("k%d", i)
	run(t, "ip", "link", "add", "eth0", "netns", n.NetNS, "type", "veth", "peer", "name", port, "netns", c.Fabric)
	run(t, "ip", "-n", c.Fabric, "link", "set", port, "master", "fabric", "up")
	run(t, "ip", "-n", n.NetNS, "addr", "add", n.IP.String()+"/24", "dev", "eth0")
	run(t, "ip", "-n", n.NetNS, "link", "set", "eth0", "up")
	run(t, "ip", "-n", n.NetNS, "route", "add", KubernetesServiceIP.String()+"/32", "via", APIAddress.String())
	// A node routes for its pods, as any Kubernetes node does.
	if err := netns.Do(n.NetNS, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	}); err != nil {
		t.Fatalf("%s: enabling forwarding: %v", n.Name, err)
	}

	var err error
	if n.mnt, err = newMountNS(n.Dir); err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	// containerd's CRI brings up each pod's lo through the loopback CNI
	// plugin, which a node has from its kubernetes-cni package, not from
	// whichever CNI gets installed later.
	refPlugins, err := upstream.EnsureCNIPlugins(t.Logf)
	if err != nil {
		n.mnt.release()
		t.Fatalf("%v", err)
	}
	if err := copyFile(filepath.Join(refPlugins, "loopback"), filepath.Join(n.Private("/opt/cni/bin"), "loopback"), 0o755); err != nil {
		n.mnt.release()
		t.Fatalf("%s: installing loopback: %v", n.Name, err)
	}
	if err := makeCgroupRoot(n.CgroupRoot); err != nil {
		n.mnt.release()
		t.Fatalf("%s: %v", n.Name, err)
	}
	// One cleanup, in order: the kubelet first (it would restart pods),
	// then containerd, then whatever pods and shims remain, then the
	// namespace with every mount in it, then the cgroups.
	t.Cleanup(func() { n.teardown(t) })

	if err := os.MkdirAll(filepath.Join(n.Dir, "run"), 0o755); err != nil {
		t.Fatalf("%v", err)
	}
	n.Socket = filepath.Join(n.Dir, "run", "containerd.sock")
	n.containerd = n.startContainerd(t)
	for _, img := range c.Images {
		if out, err := n.Ctr("images", "import", img); err != nil {
			t.Fatalf("%s: importing %s: %v\n%s", n.Name, img, err, out)
		}
	}
	n.kubelet = n.startKubelet(t)
	return n
}

// nsenterSpec runs path inside the node's network and mount namespaces.
// nsenter execs the program in place, so the pid held is the daemon's.
func (n *Node) nsenterSpec(name, path string, args ...string) testenv.ProcessSpec {
	return testenv.ProcessSpec{
		Name: name, Path: "nsenter", Dir: n.Dir,
		Args: append([]string{"--net=" + netns.Path(n.NetNS), "--mount=" + n.mnt.File, "--", path}, args...),
		// The shim is found on PATH; runc is named in the config.
		Env: []string{"PATH=" + n.cluster.ContainerdBin + ":" + os.Getenv("PATH")},
	}
}

func (n *Node) startContainerd(t testenv.T) *testenv.Process {
	t.Helper()
	cfg, err := render(containerdConfig, containerdParams{
		Root: filepath.Join(n.Dir, "containerd", "root"), State: filepath.Join(n.Dir, "containerd", "state"),
		Socket: n.Socket, Runc: n.cluster.runc, RuncRoot: filepath.Join(n.Dir, "runc"),
		PauseImage: PauseImage, Opt: filepath.Join(n.Dir, "containerd", "opt"),
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	cfgPath := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	p, err := testenv.StartProcess(n.nsenterSpec("containerd", filepath.Join(n.cluster.ContainerdBin, "containerd"), "--config", cfgPath))
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	err = testenv.Eventually(n.Name+" containerd socket", 30*time.Second, 100*time.Millisecond, func() error {
		if p.Exited() {
			return testenv.Permanent(fmt.Errorf("containerd exited:\n%s", p.Tail(30)))
		}
		_, err := n.Ctr("version")
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	return p
}

// Ctr runs ctr against the node's containerd in the k8s.io namespace (the
// one the CRI plugin uses) and returns its output.
func (n *Node) Ctr(args ...string) (string, error) {
	return testenv.Run(filepath.Join(n.cluster.ContainerdBin, "ctr"),
		append([]string{"--address", n.Socket, "--namespace", "k8s.io"}, args...)...)
}

func (n *Node) startKubelet(t testenv.T) *testenv.Process {
	t.Helper()
	cfg, err := render(kubeletConfig, kubeletParams{
		CgroupRoot: n.CgroupRoot, Socket: n.Socket, NodeIP: n.IP.String(),
		VolumePluginDir: filepath.Join(n.Dir, "volume-plugins"),
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	cfgPath := filepath.Join(n.Dir, "kubelet.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	p, err := testenv.StartProcess(n.nsenterSpec("kubelet", filepath.Join(n.cluster.KubeBin, "kubelet"),
		"--config="+cfgPath,
		"--kubeconfig="+n.cluster.NodeKubeconfig,
		// /var/lib/kubelet is the node's own inside its mount namespace.
		"--root-dir=/var/lib/kubelet",
		"--cert-dir="+filepath.Join(n.Dir, "pki"),
		"--hostname-override="+n.Name,
		"--node-ip="+n.IP.String(),
		"--v=2",
	))
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	return p
}

// teardown stops the node and removes every trace of it except its
// directory and network namespace, whose own cleanups run after this.
func (n *Node) teardown(t testenv.T) {
	if n.kubelet != nil {
		n.kubelet.Stop(10 * time.Second)
	}
	if n.containerd != nil {
		n.containerd.Stop(5 * time.Second)
	}
	var problems []string
	// Pods' processes first (they are in cgroups, not all in the mount
	// namespace), then shims and anything else in the namespace.
	if err := killCgroupRoot(n.CgroupRoot); err != nil {
		problems = append(problems, err.Error())
	}
	n.mnt.release()
	if err := killCgroupRoot(n.CgroupRoot); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		t.Logf("%s teardown: %s", n.Name, strings.Join(problems, "; "))
	}
}
