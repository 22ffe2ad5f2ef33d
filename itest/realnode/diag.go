package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Describe summarises every pod of namespace ns for a failure message:
// phase, node, IP, each container's state and restarts, the pod's events,
// and the last lines of each container's log, read from the pod log
// directory of the node it runs on (it works even when the apiserver or
// a kubelet, which `kubectl logs` goes through, is what failed).
func (c *Cluster) Describe(ns string, logLines int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := c.CP.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s/%s on %s: %s IP %s %s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP, containerStates(&p))
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if cs.RestartCount > 0 {
				fmt.Fprintf(&b, "[%s restarts %d] ", cs.Name, cs.RestartCount)
			}
		}
		b.WriteString(c.Events(p.Namespace, p.Name))
		b.WriteString("\n")
		if n := c.node(p.Spec.NodeName); n != nil {
			dir := filepath.Join(n.Private("/var/log/pods"), fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID))
			logs, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
			sort.Strings(logs)
			for _, l := range logs {
				fmt.Fprintf(&b, "  log %s:\n%s\n", strings.TrimPrefix(l, dir+"/"), tail(l, logLines))
			}
		}
	}
	return b.String()
}

// ContainerLog is the tail of every container log of pod p, read from its
// node's pod log directory.
func (c *Cluster) ContainerLog(p *corev1.Pod, lines int) string {
	n := c.node(p.Spec.NodeName)
	if n == nil {
		return ""
	}
	dir := filepath.Join(n.Private("/var/log/pods"), fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID))
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	sort.Strings(logs)
	var b strings.Builder
	for _, l := range logs {
		b.WriteString(tail(l, lines))
	}
	return b.String()
}

func (c *Cluster) node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
