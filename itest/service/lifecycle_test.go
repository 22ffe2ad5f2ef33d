package service

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/probe"
)

// outcome classifies one connection attempt.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, os.ErrDeadlineExceeded), strings.Contains(err.Error(), "timeout"):
		return "timeout"
	}
	return "error: " + err.Error()
}

// TestScaleToZeroAndBack: a client dials the Service without pause while
// its endpoints go from two to none and back. With none, every new TCP
// connection is refused at once (an RST) and every UDP datagram gets an
// ICMP port unreachable; nothing ever waits for a timeout; with endpoints
// again, connections succeed.
func TestScaleToZeroAndBack(t *testing.T) {
	e := start(t, 2)
	n1, n2 := e.c.Nodes[0], e.c.Nodes[1]
	b1, b2 := e.backend(t, "b-1", n1), e.backend(t, "b-2", n2)
	c := e.client(t, "c-1", n1)
	ip := e.service(t, "echo", echoPorts)
	e.endpoints(t, "echo", echoPorts, b1, b2)
	eventually(t, "tcp to the Service", func() error { return probe.Check(c.NetNS, probe.TCP, ip, 80, 2*time.Second) })

	var mu sync.Mutex
	phase := "up"
	seen := map[string]map[string]int{} // phase → outcome → count
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, proto := range []probe.Protocol{probe.TCP, probe.UDP} {
				// An attempt counts for a phase only if the phase held from
				// its start to its end: one that overlapped an endpoint
				// change may see either side of it.
				mu.Lock()
				p := phase
				mu.Unlock()
				o := outcome(probe.Check(c.NetNS, proto, ip, 80, 3*time.Second))
				mu.Lock()
				if phase != p {
					p = "across-a-change"
				}
				if seen[p+"/"+string(proto)] == nil {
					seen[p+"/"+string(proto)] = map[string]int{}
				}
				seen[p+"/"+string(proto)][o]++
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	set := func(p string, pods ...*cluster.Pod) {
		mu.Lock()
		phase = p + "-changing"
		mu.Unlock()
		e.endpoints(t, "echo", echoPorts, pods...)
		want := "ok"
		if len(pods) == 0 {
			want = "refused"
		}
		eventually(t, "the client to see "+want, func() error {
			for _, proto := range []probe.Protocol{probe.TCP, probe.UDP} {
				if o := outcome(probe.Check(c.NetNS, proto, ip, 80, 3*time.Second)); o != want {
					return fmt.Errorf("%s: %s", proto, o)
				}
			}
			return nil
		})
		mu.Lock()
		phase = p
		mu.Unlock()
		time.Sleep(2 * time.Second)
	}
	time.Sleep(time.Second)
	set("zero")
	set("back", b1, b2)
	close(stop)
	<-done
	t.Logf("outcomes by phase: %v", seen)
	for p, os := range seen {
		for o, n := range os {
			if o == "timeout" || strings.HasPrefix(o, "error") {
				t.Errorf("phase %s: %d attempts ended in %s: a Service without endpoints must reject, not hang", p, n, o)
			}
		}
	}
	for _, p := range []string{"up/tcp", "back/tcp", "up/udp", "back/udp"} {
		if seen[p]["ok"] == 0 || len(seen[p]) != 1 {
			t.Errorf("phase %s: want only successes, got %v", p, seen[p])
		}
	}
	for _, p := range []string{"zero/tcp", "zero/udp"} {
		if seen[p]["refused"] == 0 || len(seen[p]) != 1 {
			t.Errorf("phase %s: want only refusals, got %v", p, seen[p])
		}
	}
}

// TestHairpin: the only endpoint of a Service reaches itself through the
// Service, over TCP and UDP; it sees the connection come from the hairpin
// address, not from itself.
func TestHairpin(t *testing.T) {
	e := start(t, 2)
	b := e.backend(t, "b-1", e.c.Nodes[0])
	ip := e.service(t, "echo", echoPorts)
	e.endpoints(t, "echo", echoPorts, b)
	for _, network := range []string{"tcp", "udp"} {
		eventually(t, network+" hairpin", func() error {
			got, as, err := who(b.NetNS, network, ip, 90)
			if err != nil {
				return err
			}
			if got != b.Name || as != "169.254.0.253" {
				return fmt.Errorf("answered by %s, seen as %s; want %s seen as 169.254.0.253", got, as, b.Name)
			}
			return nil
		})
	}
	for _, proto := range []probe.Protocol{probe.TCP, probe.UDP} {
		if err := probe.Check(b.NetNS, proto, ip, 80, 2*time.Second); err != nil {
			t.Errorf("%s echo through the Service from its own endpoint: %v", proto, err)
		}
	}
}

// TestKillPluginDuringConnection: long TCP connections through the
// ClusterIP, to a same-node and a cross-node endpoint, keep exchanging
// data while the service plugin is killed with SIGKILL on both nodes,
// restarted by the agent and synced again.
func TestKillPluginDuringConnection(t *testing.T) {
	e := start(t, 2)
	n1, n2 := e.c.Nodes[0], e.c.Nodes[1]
	b1, b2 := e.backend(t, "b-1", n1), e.backend(t, "b-2", n2)
	c := e.client(t, "c-1", n1)
	ip := e.service(t, "echo", echoPorts)
	e.endpoints(t, "echo", echoPorts, b1, b2)
	eventually(t, "tcp to the Service", func() error { return probe.Check(c.NetNS, probe.TCP, ip, 70, 2*time.Second) })

	// Enough connections that both endpoints hold some.
	var conns []net.Conn
	for range 8 {
		cn, err := netns.Dial(c.NetNS, "tcp", net.JoinHostPort(ip.String(), "70"), 3*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer cn.Close()
		conns = append(conns, cn)
	}
	errs := make(chan error, len(conns))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, cn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				msg := fmt.Sprintf("conn %d message %d\n", i, seq)
				cn.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := cn.Write([]byte(msg)); err != nil {
					errs <- fmt.Errorf("connection %d, message %d: write: %w", i, seq, err)
					return
				}
				if n, err := io_ReadFull(cn, buf[:len(msg)]); err != nil || string(buf[:n]) != msg {
					errs <- fmt.Errorf("connection %d, message %d: read %q: %v", i, seq, buf[:n], err)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	time.Sleep(time.Second)
	for _, n := range e.c.Nodes {
		e.killPlugin(t, n)
	}
	for _, n := range e.c.Nodes {
		e.waitSynced(t, n)
		if _, _, restarts := e.plugin(t, n, "service"); restarts < 1 {
			t.Errorf("%s: the agent reports %d restarts of service after kill -9", n.Name, restarts)
		}
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a connection through the ClusterIP did not survive the kill: %v", err)
	}
	// New connections work with the new incarnations too, and a Service
	// without endpoints still refuses (its metered reject path survived).
	if err := probe.Check(c.NetNS, probe.TCP, ip, 80, 2*time.Second); err != nil {
		t.Errorf("a new connection after the restart: %v", err)
	}
	empty := e.service(t, "empty", echoPorts)
	eventually(t, "the Service without endpoints refusing after the restart", func() error {
		if o := outcome(probe.Check(c.NetNS, probe.TCP, empty, 80, 2*time.Second)); o != "refused" {
			return fmt.Errorf("%s", o)
		}
		return nil
	})
}

func io_ReadFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
