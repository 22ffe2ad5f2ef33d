package realnode

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/netpolmodel"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

// Model is the Kubernetes NetworkPolicy model of itest/netpolmodel
// (namespaces x, y, z labelled ns=<name>; pods a, b, c labelled
// pod=<name>) on real pods: created through the apiserver, scheduled on
// the nodes, started by kubelet and containerd, networked by whatever CNI
// the cluster runs. Every pod serves TCP and UDP on ports 80 and 81 with
// agnhost serve-hostname (one container per port) and declares the
// model's named container ports.
//
// Probes are what the upstream e2e suite does: `agnhost connect` exec'd in
// the source pod through the apiserver (Exec), so they leave from the
// pod's own network namespace as its own process.
type Model struct {
	c *Cluster
	// Names are the pods, "ns/pod", in model order.
	Names []string
	// Pods by name, as last seen Running.
	Pods map[string]*corev1.Pod
	// ProbeTimeout is agnhost connect's --timeout: an expected deny
	// costs that much.
	ProbeTimeout time.Duration
	// Workers is how many probes run at once.
	Workers int
}

// SCTP is left out: agnhost serves and connects SCTP through the kernel's
// SCTP sockets, and a kernel without the sctp module (this harness's) has
// none; itest/netpolmodel checks SCTP with probes of its own.
var modelProtocols = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}

// modelPod is model pod ns/name on node: a container per model port
// running `agnhost serve-hostname --tcp --udp` on it, with the model's
// named ports of that number.
func modelPod(ns, name, node string) *corev1.Pod {
	var zero int64
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"pod": name}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			TerminationGracePeriodSeconds: &zero,
		},
	}
	for _, port := range netpolmodel.Ports {
		ctr := corev1.Container{
			Name: fmt.Sprintf("serve-%d", port), Image: AgnhostImage, ImagePullPolicy: corev1.PullNever,
			Args: []string{"serve-hostname", "--tcp", "--udp", "--http=false", "--port=" + strconv.Itoa(port)},
		}
		for _, cp := range netpolmodel.ContainerPorts() {
			for _, proto := range modelProtocols {
				if int(cp.ContainerPort) == port && cp.Protocol == proto {
					ctr.Ports = append(ctr.Ports, cp)
				}
			}
		}
		p.Spec.Containers = append(p.Spec.Containers, ctr)
	}
	return p
}

// StartModel creates the model's namespaces and pods, spread round-robin
// over the nodes in model order (x/a on the first node, x/b on the second,
// ...), so every pair of namespaces has pods on one node and across nodes,
// and waits until every pod is Running with an IP. The namespaces (and
// with them the pods and policies) are deleted on cleanup.
func (c *Cluster) StartModel(t testenv.T) *Model {
	t.Helper()
	m := &Model{c: c, Names: netpolmodel.ModelNames(), Pods: map[string]*corev1.Pod{}, ProbeTimeout: time.Second, Workers: 12}
	ctx := context.Background()
	for _, ns := range netpolmodel.Namespaces {
		_, err := c.CP.Client.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"ns": ns}}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating namespace %s: %v", ns, err)
		}
		t.Cleanup(func() {
			_ = c.CP.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		})
	}
	for i, key := range m.Names {
		ns, name, _ := strings.Cut(key, "/")
		c.CreatePod(t, ns, modelPod(ns, name, c.Nodes[i%len(c.Nodes)].Name))
	}
	for _, key := range m.Names {
		ns, name, _ := strings.Cut(key, "/")
		p, err := c.WaitPod(ns, name, Running, 180*time.Second)
		if err != nil {
			t.Fatalf("model pod %s: %v\n%s", key, err, c.Describe(ns, 5))
		}
		m.Pods[key] = p
	}
	return m
}

// Placement says which pods run on which node, for the log.
func (m *Model) Placement() string {
	by := map[string][]string{}
	var nodes []string
	for _, k := range m.Names {
		n := m.Pods[k].Spec.NodeName
		if by[n] == nil {
			nodes = append(nodes, n)
		}
		by[n] = append(by[n], fmt.Sprintf("%s(%s)", k, m.Pods[k].Status.PodIP))
	}
	var parts []string
	for _, n := range nodes {
		parts = append(parts, n+": "+strings.Join(by[n], " "))
	}
	return strings.Join(parts, "; ")
}

// IP is a model pod's IP.
func (m *Model) IP(key string) string { return m.Pods[key].Status.PodIP }

// errExec marks a probe whose exec failed: it says nothing about the
// network.
type errExec struct{ err error }

func (e errExec) Error() string { return "exec failed: " + e.err.Error() }

// Probe runs `agnhost connect <to's IP>:<port> --protocol=<proto>` in pod
// from and returns nil when it connected (TCP), got an answer (UDP), or
// agnhost's verdict (TIMEOUT, REFUSED, OTHER) otherwise. An exec that
// itself fails is tried again, then reported as errExec.
func (m *Model) Probe(ctx context.Context, from, to string, proto probe.Protocol, port int) error {
	ns, name, _ := strings.Cut(from, "/")
	target := net.JoinHostPort(m.IP(to), strconv.Itoa(port))
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		// The first container is as good as any: containers of a pod share
		// its network namespace.
		r := m.c.Exec(ctx, ns, name, "serve-80", "/agnhost", "connect", target,
			"--timeout="+m.ProbeTimeout.String(), "--protocol="+string(proto))
		switch {
		case r.Err == nil && r.ExitCode == 0:
			return nil
		case r.Err == nil:
			return fmt.Errorf("%s", firstLine(r.Stderr))
		}
		last = r.Err
		if ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errExec{last}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s == "" {
		return "failed, nothing on stderr"
	}
	return s
}

// Run probes every ordered pair of distinct model pods for proto/port,
// Workers at a time, and returns the outcome as a probe.Matrix (Errors
// hold agnhost's verdicts).
func (m *Model) Run(proto probe.Protocol, port int) *probe.Matrix {
	out := &probe.Matrix{Proto: proto, Port: port, From: m.Names, To: m.Names,
		Reachable: map[string]map[string]bool{}, Errors: map[string]map[string]error{}}
	for _, f := range m.Names {
		out.Reachable[f] = map[string]bool{}
		out.Errors[f] = map[string]error{}
	}
	type pair struct{ from, to string }
	jobs := make(chan pair)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range m.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				ctx, cancel := context.WithTimeout(context.Background(), m.ProbeTimeout+20*time.Second)
				err := m.Probe(ctx, j.from, j.to, proto, port)
				cancel()
				mu.Lock()
				out.Reachable[j.from][j.to] = err == nil
				if err != nil {
					out.Errors[j.from][j.to] = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, f := range m.Names {
		for _, d := range m.Names {
			if f != d {
				jobs <- pair{f, d}
			}
		}
	}
	close(jobs)
	wg.Wait()
	return out
}

// Check probes the whole matrix for proto/port until it equals want, and
// fails the test once a round that started wait after the call still
// disagrees (the controller computes, streams, and each node's netpol
// installs flows: that takes a moment; and a round of 72 execs can itself
// take longer than wait on a busy machine, so the deadline is on a
// round's start, not its end). The failure shows the expected table, the
// actual one (got!want where they differ) and why each differing probe
// ended as it did. Check returns the rounds it took.
func (m *Model) Check(t testenv.T, what string, proto probe.Protocol, port int, want *netpolmodel.Reachability, wait time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(wait)
	for round := 1; ; round++ {
		started := time.Now()
		got := m.Run(proto, port)
		diff := got.Diff(want.Expected)
		if diff == "" {
			return round
		}
		if started.After(deadline) {
			t.Fatalf("%s: %s/%d on real pods differs after %s (%d rounds)\nexpected:\n%s\nactual (got!want):\n%s\nkube-system:\n%s",
				what, proto, port, wait, round, want.String(proto, port), diff, m.c.Describe("kube-system", 15))
			return round
		}
		time.Sleep(200 * time.Millisecond)
	}
}
