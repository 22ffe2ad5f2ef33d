package service

import (
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestSessionAffinity: with sessionAffinity ClientIP, every new
// connection of a client reaches the same endpoint while it keeps
// connecting within the timeout; once it has been idle longer than the
// timeout, its next connection is balanced again, so across a few idle
// periods it meets more than one endpoint.
func TestSessionAffinity(t *testing.T) {
	e := start(t, 2)
	n1, n2 := e.c.Nodes[0], e.c.Nodes[1]
	var bs []string
	b1, b2, b3 := e.backend(t, "b-1", n1), e.backend(t, "b-2", n2), e.backend(t, "b-3", n2)
	bs = append(bs, b1.Name, b2.Name, b3.Name)
	c := e.client(t, "c-1", n1)
	const timeout = 2
	s := e.createService(t, "sticky", whoPorts, func(s *corev1.Service) {
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(timeout))}}
	})
	ip := s.Spec.ClusterIP
	e.endpoints(t, "sticky", whoPorts, b1, b2, b3)
	cip := net.ParseIP(ip)
	var first string
	eventually(t, "the Service", func() (err error) {
		first, _, err = who(c.NetNS, "tcp", cip, 90)
		return err
	})
	// Within the timeout: always the same endpoint.
	for i := range 30 {
		got, _, err := who(c.NetNS, "tcp", cip, 90)
		if err != nil || got != first {
			t.Fatalf("connection %d reached %s (%v), want %s, where the client's first connection went", i, got, err, first)
		}
	}
	seen := affinityExpires(t, c.NetNS, cip, timeout, first)
	t.Logf("endpoints met across idle periods: %v (of %v)", seen, bs)
}

// affinityExpires idles a client (in netns) that has been reaching first
// through the sticky Service ip:90 longer than the affinity timeout (in
// seconds), again and again, until its next connection is balanced to
// another endpoint; after each idle period it must stick again. It fails
// the test when 8 idle periods never met another endpoint, and returns
// the endpoints met.
func affinityExpires(t *testing.T, netns string, ip net.IP, timeout int, first string) map[string]int {
	t.Helper()
	seen := map[string]int{first: 1}
	for cycle := 0; len(seen) < 2 && cycle < 8; cycle++ {
		time.Sleep(time.Duration(timeout)*time.Second + 1500*time.Millisecond)
		got, _, err := who(netns, "tcp", ip, 90)
		if err != nil {
			t.Fatalf("after an idle period: %v", err)
		}
		seen[got]++
		// and sticky again right after
		for range 5 {
			if again, _, err := who(netns, "tcp", ip, 90); err != nil || again != got {
				t.Fatalf("after re-balancing to %s a connection reached %s (%v)", got, again, err)
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("after 8 idle periods longer than the %ds timeout the client only ever reached %v: affinity never expired", timeout, seen)
	}
	return seen
}
