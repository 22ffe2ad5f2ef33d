package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// UDPPair is a client pod on one node and a server pod (agnhost netexec,
// UDP port 8081) on another, for watching pod-to-pod traffic across nodes
// while something on the nodes changes (a rolling update, a plugin loading
// or unloading).
type UDPPair struct {
	Namespace              string
	Client, Server         *corev1.Pod // as first seen Running
	hc                     *http.Client
	url                    string
	cluster                *Cluster
	clientNode, serverNode *Node
}

// NewUDPPair creates the pods "server" on to and "client" on from in ns
// (removed on cleanup), waits until they run, and until the client gets a
// first answer from the server.
func (c *Cluster) NewUDPPair(t testenv.T, ns string, from, to *Node) *UDPPair {
	t.Helper()
	c.CreatePod(t, ns, AgnhostPod("server", to.Name, corev1.RestartPolicyAlways, "netexec", "--http-port=8080", "--udp-port=8081"))
	c.CreatePod(t, ns, AgnhostPod("client", from.Name, corev1.RestartPolicyAlways, "netexec", "--http-port=8080"))
	p := &UDPPair{Namespace: ns, cluster: c, clientNode: from, serverNode: to}
	for _, name := range []string{"server", "client"} {
		pod, err := c.WaitPod(ns, name, Running, 120*time.Second)
		if err != nil {
			t.Fatalf("%v\n%s", err, c.Describe(ns, 10))
		}
		if name == "server" {
			p.Server = pod
		} else {
			p.Client = pod
		}
	}
	// The harness asks the client pod (from its node's host network) to
	// send one UDP request to the server pod and say whether it got the
	// answer: netexec's /dial. netexec waits 5 s for a UDP answer; the
	// HTTP timeout is longer so that a lost UDP request is told apart
	// (netexec's error) from a client pod the harness could not reach.
	p.hc = &http.Client{Timeout: 8 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return netns.Dial(from.NetNS, network, addr, 2*time.Second)
		}}}
	p.url = fmt.Sprintf("http://%s/dial?request=hostname&protocol=udp&host=%s&port=8081&tries=1",
		net.JoinHostPort(p.Client.Status.PodIP, "8080"), p.Server.Status.PodIP)
	if err := testenv.Eventually("client pod reaching the server pod", 60*time.Second, 200*time.Millisecond, p.Probe); err != nil {
		t.Fatalf("%v\n%s", err, c.Describe(ns, 10))
	}
	return p
}

// Probe sends one UDP request from the client pod to the server pod and
// returns an error unless the server's answer came back.
func (p *UDPPair) Probe() error {
	resp, err := p.hc.Get(p.url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct{ Responses, Errors []string }
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%v: %s", err, b)
	}
	if len(r.Responses) != 1 || r.Responses[0] != p.Server.Name {
		return fmt.Errorf("no answer from the server pod: %s", b)
	}
	return nil
}

// StreamResult is what a stream of requests saw.
type StreamResult struct {
	Sent int
	// Lost are the failed requests, each with its time and error.
	Lost []string
}

// Stream sends one request every 20 ms, each after the previous one
// finished, until the returned function is called; that function stops
// the stream and returns what it saw.
func (p *UDPPair) Stream() (stop func() StreamResult) {
	var mu sync.Mutex
	var res StreamResult
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			err := p.Probe()
			mu.Lock()
			res.Sent++
			if err != nil {
				res.Lost = append(res.Lost, time.Now().Format("15:04:05.000")+" "+err.Error())
			}
			mu.Unlock()
		}
	}()
	var once sync.Once
	return func() StreamResult {
		once.Do(func() { close(quit); <-done })
		mu.Lock()
		defer mu.Unlock()
		return StreamResult{Sent: res.Sent, Lost: append([]string(nil), res.Lost...)}
	}
}

// Unchanged reports an error unless both pods are the ones first seen
// (same UID), still Running with the same IPs, and none of their
// containers restarted: their traffic was never interrupted by a new
// sandbox.
func (p *UDPPair) Unchanged() error {
	for _, was := range []*corev1.Pod{p.Server, p.Client} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		now, err := p.cluster.CP.Client.CoreV1().Pods(p.Namespace).Get(ctx, was.Name, metav1.GetOptions{})
		cancel()
		if err != nil {
			return err
		}
		if now.UID != was.UID {
			return fmt.Errorf("pod %s was replaced (UID %s, was %s)", was.Name, now.UID, was.UID)
		}
		if err := Running(now); err != nil {
			return fmt.Errorf("pod %s: %v", was.Name, err)
		}
		if now.Status.PodIP != was.Status.PodIP {
			return fmt.Errorf("pod %s has IP %s, was %s", was.Name, now.Status.PodIP, was.Status.PodIP)
		}
		for _, cs := range now.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				return fmt.Errorf("pod %s: container %s restarted %d times", was.Name, cs.Name, cs.RestartCount)
			}
		}
	}
	return nil
}

// WaitDaemonSetRolled waits until DaemonSet ns/name has rolled out its
// current template (every pod updated and available) and every pod of it
// that selector matches is accepted by podOK (e.g. runs the new image).
func (c *Cluster) WaitDaemonSetRolled(ns, name, selector string, podOK func(*corev1.Pod) error, timeout time.Duration) error {
	return testenv.Eventually("DaemonSet "+ns+"/"+name+" rolled out", timeout, 500*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ds, err := c.CP.Client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := ds.Status
		if st.ObservedGeneration < ds.Generation || st.UpdatedNumberScheduled != st.DesiredNumberScheduled ||
			st.NumberAvailable != st.DesiredNumberScheduled || st.NumberUnavailable != 0 {
			return fmt.Errorf("status %+v", st)
		}
		pods, err := c.CP.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s is terminating", p.Name)
			}
			if err := podOK(&p); err != nil {
				return fmt.Errorf("pod %s: %w", p.Name, err) // %w: podOK may say testenv.Permanent
			}
		}
		return nil
	})
}
