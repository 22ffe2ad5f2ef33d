package kit

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"syscall"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/probe"
)

// Pod is a pod namespace attached to the node by CNI.
type Pod struct {
	Name string
	// NetNS is the pod's network namespace; IP its first IPv4 address.
	NetNS string
	IP    net.IP
	// CNI is the harness pod: the full CNI result, container ID, IPs.
	CNI *cluster.Pod
}

// AddPod does a kubelet's part of starting a pod on the node: a network
// namespace, then CNI ADD through libcni with the K8S_POD_* args, handled
// by switchyard-cni, the agent and podnet. It needs WithPodnet. The pod is
// deleted (CNI DEL, namespace) on cleanup.
func (n *Node) AddPod(name string) *Pod {
	n.t.Helper()
	if !slices.Contains(n.plugins, "podnet") {
		n.t.Fatalf("kit: AddPod(%q): pods are wired by podnet; start the node with Options.WithPodnet", name)
	}
	n.mu.Lock()
	_, dup := n.pods[name]
	n.mu.Unlock()
	if dup {
		n.t.Fatalf("kit: AddPod(%q): a pod of that name already runs on %s", name, n.Name)
	}
	cp := n.cluster.AddPod(n.t, cluster.PodSpec{Name: name, Node: n.node})
	p := &Pod{Name: name, NetNS: cp.NetNS, IP: cp.IP(), CNI: cp}
	n.mu.Lock()
	n.pods[name] = p
	n.mu.Unlock()
	return p
}

// Protocol is what Probe speaks.
type Protocol = probe.Protocol

// The protocols Probe speaks.
const (
	TCP  = probe.TCP
	UDP  = probe.UDP
	SCTP = probe.SCTP
	ICMP = probe.ICMP
)

// Outcome is what a probe saw.
type Outcome string

const (
	// Connected: a full round trip (TCP or UDP echo, SCTP INIT-ACK, ping
	// reply).
	Connected Outcome = "connected"
	// Refused: the connection was actively refused (a TCP reset or an ICMP
	// port unreachable reached the client).
	Refused Outcome = "refused"
	// Timeout: nothing came back in time; what a dropping flow gives.
	Timeout Outcome = "timeout"
	// Unreachable: the client's stack or an ICMP error said there is no
	// route or host.
	Unreachable Outcome = "unreachable"
)

// Probe sends one probe from one pod to another and says what came back.
// The kit listens on port inside to first (TCP and UDP echo, SCTP INIT
// responder, kept until cleanup), so the outcome is the network's doing,
// not a missing server. ICMP ignores port.
func (n *Node) Probe(from, to *Pod, proto Protocol, port int) Outcome {
	n.t.Helper()
	if proto != ICMP {
		key := fmt.Sprintf("%s/%d", to.Name, port)
		n.mu.Lock()
		serving := n.serving[key]
		n.serving[key] = true
		n.mu.Unlock()
		if !serving {
			probe.Serve(n.t, to.NetNS, port)
		}
	}
	err := probe.Check(from.NetNS, proto, to.IP, port, probe.DefaultTimeout)
	o, ok := classify(err)
	if !ok {
		n.t.Fatalf("kit: probe %s %s -> %s:%d: %v", proto, from.Name, to.Name, port, err)
	}
	return o
}

// classify maps a probe error to an Outcome; false for errors that say
// nothing about the network (a broken probe).
func classify(err error) (Outcome, bool) {
	var ne net.Error
	switch {
	case err == nil:
		return Connected, true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return Refused, true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return Unreachable, true
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return Timeout, true
	}
	// The ICMP probe runs ping, whose exit says only "no reply".
	var ee interface{ ExitCode() int }
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return Timeout, true
	}
	return "", false
}
