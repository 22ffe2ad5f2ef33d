package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// PodSpec describes a pod to create.
type PodSpec struct {
	Name      string
	Namespace string // default "default"
	Node      *Node
	Labels    map[string]string
	// Ports are the container ports, so named ports in policies resolve.
	Ports []corev1.ContainerPort
}

// Pod is a pod namespace attached by CNI.
type Pod struct {
	Name, Namespace string
	Node            *Node
	NetNS           string
	ContainerID     string
	IfName          string
	// IPs are the addresses CNI returned, IPv4 first.
	IPs []net.IP
	// Result is the CNI result as the plugin returned it.
	Result *current.Result

	cluster *Cluster
	deleted bool
}

// IP returns the pod's first IPv4 address (or its first address).
func (p *Pod) IP() net.IP {
	for _, ip := range p.IPs {
		if ip.To4() != nil {
			return ip
		}
	}
	if len(p.IPs) > 0 {
		return p.IPs[0]
	}
	return nil
}

// Key is namespace/name.
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }

// loadNetworkList picks the node's network the way container runtimes do:
// the lexically first config list in the CNI config directory.
func (n *Node) loadNetworkList() (*libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(n.CNIConfDir, []string{".conflist"})
	if err != nil {
		return nil, fmt.Errorf("reading CNI config dir %s: %w", n.CNIConfDir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no .conflist in %s on %s: is the agent running and has it written its CNI config?", n.CNIConfDir, n.Name)
	}
	sort.Strings(files)
	return libcni.NetworkConfFromFile(files[0])
}

func (n *Node) cni() *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{n.CNIBinDir}, filepath.Join(n.Dir, "cni-cache"), nil)
}

func (p *Pod) runtimeConf(uid string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: p.ContainerID,
		NetNS:       netns.Path(p.NetNS),
		IfName:      p.IfName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", p.Namespace},
			{"K8S_POD_NAME", p.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", p.ContainerID},
			{"K8S_POD_UID", uid},
		},
	}
}

// AddPod does kubelet's part of starting a pod: it creates the Pod object
// bound to the node, a network namespace, calls CNI ADD through libcni with
// the K8S_POD_* args, and writes the returned IPs into the Pod status. The pod
// is deleted (CNI DEL, namespace, object) on cleanup unless DeletePod ran.
func (c *Cluster) AddPod(t testenv.T, spec PodSpec) *Pod {
	t.Helper()
	p, err := c.addPod(t, spec)
	if err != nil {
		t.Fatalf("adding pod %s/%s on %s: %v", spec.Namespace, spec.Name, spec.Node.Name, err)
	}
	return p
}

// TryAddPod is AddPod for a pod that may fail to start: it returns the
// error (a CNI error keeps its code, see libcni's *types.Error) instead of
// failing the test. Whatever was created is removed on cleanup.
func (c *Cluster) TryAddPod(t testenv.T, spec PodSpec) (*Pod, error) {
	t.Helper()
	return c.addPod(t, spec)
}

func (c *Cluster) addPod(t testenv.T, spec PodSpec) (*Pod, error) {
	if spec.Namespace == "" {
		spec.Namespace = "default"
	}
	if spec.Node == nil {
		return nil, fmt.Errorf("PodSpec.Node is nil: say which node the pod runs on")
	}
	p := &Pod{
		Name: spec.Name, Namespace: spec.Namespace, Node: spec.Node, IfName: "eth0", cluster: c,
		ContainerID: fmt.Sprintf("%s-%s-%s", testenv.RunID(), spec.Namespace, spec.Name),
	}
	p.NetNS = testenv.Name(fmt.Sprintf("p-%s-%s", spec.Namespace, spec.Name))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	uid := ""
	if c.client != nil {
		if err := c.ensureNamespace(ctx, spec.Namespace); err != nil {
			return nil, err
		}
		obj := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: spec.Namespace, Labels: spec.Labels},
			Spec: corev1.PodSpec{
				NodeName:   spec.Node.Name,
				Containers: []corev1.Container{{Name: "main", Image: "switchyard.dev/itest-pod", Ports: spec.Ports}},
			},
		}
		created, err := c.client.CoreV1().Pods(spec.Namespace).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("creating Pod object: %w", err)
		}
		uid = string(created.UID)
	}
	if err := netns.Add(p.NetNS); err != nil {
		c.deletePodObject(p)
		return nil, err
	}
	t.Cleanup(func() {
		if err := c.deletePod(p); err != nil {
			t.Logf("cleanup of pod %s: %v", p.Key(), err)
		}
	})
	list, err := spec.Node.loadNetworkList()
	if err != nil {
		return nil, err
	}
	res, err := spec.Node.cni().AddNetworkList(ctx, list, p.runtimeConf(uid))
	if err != nil {
		return nil, fmt.Errorf("CNI ADD: %w", err)
	}
	if p.Result, err = current.NewResultFromResult(res); err != nil {
		return nil, fmt.Errorf("converting CNI result: %w", err)
	}
	for _, ipc := range p.Result.IPs {
		p.IPs = append(p.IPs, ipc.Address.IP)
	}
	sort.SliceStable(p.IPs, func(i, j int) bool { return p.IPs[i].To4() != nil && p.IPs[j].To4() == nil })
	if len(p.IPs) == 0 {
		return nil, fmt.Errorf("CNI ADD returned no IP: %s", res)
	}
	if c.client != nil {
		if err := c.writePodStatus(ctx, p); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	c.pods[p.Key()] = p
	c.mu.Unlock()
	return p, nil
}

// GC runs CNI GC on the node, as a runtime does, listing valid as the
// attachments it still has: everything else the network holds for pods of
// this node is to be released.
func (n *Node) GC(valid []*Pod) error {
	list, err := n.loadNetworkList()
	if err != nil {
		return err
	}
	args := &libcni.GCArgs{}
	for _, p := range valid {
		args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: p.ContainerID, IfName: p.IfName})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return n.cni().GCNetworkList(ctx, list, args)
}

func (c *Cluster) ensureNamespace(ctx context.Context, name string) error {
	_, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Namespace %s: %w", name, err)
	}
	return nil
}

func (c *Cluster) writePodStatus(ctx context.Context, p *Pod) error {
	obj, err := c.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	obj.Status.Phase = corev1.PodRunning
	obj.Status.HostIP = p.Node.UnderlayIP.String()
	obj.Status.PodIP = p.IPs[0].String()
	obj.Status.PodIPs = nil
	for _, ip := range p.IPs {
		obj.Status.PodIPs = append(obj.Status.PodIPs, corev1.PodIP{IP: ip.String()})
	}
	obj.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if _, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing Pod status: %w", err)
	}
	return nil
}

// DeletePod does kubelet's part of stopping a pod: CNI DEL, then the
// namespace and the Pod object go.
func (c *Cluster) DeletePod(t testenv.T, p *Pod) {
	t.Helper()
	if err := c.deletePod(p); err != nil {
		t.Fatalf("deleting pod %s: %v", p.Key(), err)
	}
}

func (c *Cluster) deletePod(p *Pod) error {
	if p.deleted {
		return nil
	}
	p.deleted = true
	c.mu.Lock()
	delete(c.pods, p.Key())
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var firstErr error
	if list, err := p.Node.loadNetworkList(); err == nil {
		if err := p.Node.cni().DelNetworkList(ctx, list, p.runtimeConf("")); err != nil {
			firstErr = fmt.Errorf("CNI DEL: %w", err)
		}
	} else if _, statErr := os.Stat(p.Node.CNIConfDir); statErr == nil {
		firstErr = err
	}
	if err := netns.Delete(p.NetNS); err != nil && firstErr == nil {
		firstErr = err
	}
	c.deletePodObject(p)
	return firstErr
}

func (c *Cluster) deletePodObject(p *Pod) {
	if c.client == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	zero := int64(0)
	_ = c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

// CheckPod runs CNI CHECK for the pod and returns its error.
func (c *Cluster) CheckPod(p *Pod) error {
	list, err := p.Node.loadNetworkList()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.Node.cni().CheckNetworkList(ctx, list, p.runtimeConf(""))
}

// Pods returns the pods currently added, in no particular order.
func (c *Cluster) Pods() []*Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Pod, 0, len(c.pods))
	for _, p := range c.pods {
		out = append(out, p)
	}
	return out
}
