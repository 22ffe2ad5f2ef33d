package realnode

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/testenv"
)

// Matrix is the outcome of pod-to-pod probes: from every node (a client
// pod scheduled there) to every target pod (labelled pod@node).
type Matrix struct {
	From, To []string
	// Err holds, per from and to, nil for a successful connect.
	Err map[string]map[string]error
}

// Connectivity runs, for every node and every target, an agnhost
// `connect` client pod on that node against the target's IP and port, all
// at once, and collects which succeeded. The client pods are deleted
// before it returns.
func (c *Cluster) Connectivity(t testenv.T, ns string, targets []*corev1.Pod, port int) *Matrix {
	t.Helper()
	m := &Matrix{Err: map[string]map[string]error{}}
	label := func(p *corev1.Pod) string { return p.Name + "@" + p.Spec.NodeName }
	for _, p := range targets {
		m.To = append(m.To, label(p))
	}
	type job struct{ from, to, pod string }
	var jobs []job
	stamp := time.Now().UnixNano() % 100000
	for _, n := range c.Nodes {
		m.From = append(m.From, n.Name)
		m.Err[n.Name] = map[string]error{}
		for i, p := range targets {
			name := fmt.Sprintf("probe-%d-%d-%d", stamp, n.Index, i)
			target := net.JoinHostPort(p.Status.PodIP, fmt.Sprint(port))
			c.CreatePod(t, ns, AgnhostPod(name, n.Name, corev1.RestartPolicyNever, "connect", target, "--timeout=5s"))
			jobs = append(jobs, job{n.Name, label(p), name})
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.WaitPod(ns, j.pod, Finished, 90*time.Second)
			if err != nil && p != nil {
				// agnhost connect says why: timeout, refused, no route.
				err = fmt.Errorf("%w; client log: %s", err, strings.TrimSpace(c.ContainerLog(p, 3)))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = c.CP.Client.CoreV1().Pods(ns).Delete(ctx, j.pod, metav1.DeleteOptions{})
			mu.Lock()
			m.Err[j.from][j.to] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	return m
}

// Failures lists the failed cells, one a line; empty when all passed.
func (m *Matrix) Failures() string {
	var b strings.Builder
	for _, f := range m.From {
		for _, to := range m.To {
			if err := m.Err[f][to]; err != nil {
				fmt.Fprintf(&b, "%s -> %s: %v\n", f, to, err)
			}
		}
	}
	return b.String()
}

// String renders the matrix as a table: rows are the client's node,
// columns the target pods, "ok" or "FAIL".
func (m *Matrix) String() string {
	var b strings.Builder
	w := 10
	for _, to := range m.To {
		w = max(w, len(to)+2)
	}
	fmt.Fprintf(&b, "%-10s", "from\\to")
	for _, to := range m.To {
		fmt.Fprintf(&b, "%-*s", w, to)
	}
	b.WriteString("\n")
	for _, f := range m.From {
		fmt.Fprintf(&b, "%-10s", f)
		for _, to := range m.To {
			cell := "ok"
			if m.Err[f][to] != nil {
				cell = "FAIL"
			}
			fmt.Fprintf(&b, "%-*s", w, cell)
		}
		b.WriteString("\n")
	}
	return b.String()
}
