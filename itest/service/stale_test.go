package service

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
)

// udpAsk sends on a connected UDP socket and returns which backend
// answered.
func udpAsk(c net.Conn) (string, error) {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("who\n")); err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	return strings.Fields(string(buf[:n]))[0], nil
}

// staleUDPMoves keeps one UDP socket from netns from to a Service IP's
// port 90, balanced over b1 and b2; once setEndpoints left only the other
// one in the Service, the same socket must be answered by it.
func staleUDPMoves(t *testing.T, from, ip string, b1, b2 *cluster.Pod, setEndpoints func(stay *cluster.Pod)) {
	t.Helper()
	conn, err := netns.Dial(from, "udp", net.JoinHostPort(ip, "90"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var first string
	eventually(t, "a first answer", func() error {
		first, err = udpAsk(conn)
		return err
	})
	for range 5 {
		if got, err := udpAsk(conn); err != nil || got != first {
			t.Fatalf("the same socket was answered by %s, then by %s (%v): no conntrack entry?", first, got, err)
		}
	}
	stay := map[string]*cluster.Pod{b1.Name: b2, b2.Name: b1}[first]
	t.Logf("socket %s balanced to %s; removing it from the Service, keeping %s", conn.LocalAddr(), first, stay.Name)
	setEndpoints(stay)
	// The departed endpoint still runs: only a flush moves the socket.
	eventually(t, "the same socket answered by "+stay.Name, func() error {
		got, err := udpAsk(conn)
		if err == nil && got != stay.Name {
			err = fmt.Errorf("still answered by %s", got)
		}
		return err
	})
}

// TestStaleUDPFlushed: a UDP client keeps one socket (one conntrack
// entry) to the Service. When the endpoint it was balanced to leaves the
// Service, the client's next datagram on that same socket reaches another
// endpoint at once: the stale entry was flushed. (The old endpoint still
// runs and would answer if the entry had stayed.)
func TestStaleUDPFlushed(t *testing.T) {
	e := start(t, 2)
	n1, n2 := e.c.Nodes[0], e.c.Nodes[1]
	b1, b2 := e.backend(t, "b-1", n1), e.backend(t, "b-2", n2)
	c := e.client(t, "c-1", n1)
	ip := e.service(t, "echo", echoPorts)
	e.endpoints(t, "echo", echoPorts, b1, b2)
	staleUDPMoves(t, c.NetNS, ip.String(), b1, b2, func(stay *cluster.Pod) { e.endpoints(t, "echo", echoPorts, stay) })
	t.Logf("conntrack on %s:\n%s", n1.Name, n1.OVS.Appctl(t, "dpctl/dump-conntrack"))
}
