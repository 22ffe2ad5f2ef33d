package placement

import (
	"fmt"
	"net/netip"
	"testing"
)

func nodes(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("node-%d", i))
	}
	return out
}

func ips(n int) []netip.Addr {
	var out []netip.Addr
	a := netip.MustParseAddr("10.96.0.0")
	for range n {
		a = a.Next()
		out = append(out, a)
	}
	return out
}

func TestRingAgreesWhateverTheOrder(t *testing.T) {
	a, b := NewRing([]string{"n1", "n2", "n3"}), NewRing([]string{"n3", "n1", "n2"})
	for _, ip := range ips(200) {
		if a.Holder(ip) != b.Holder(ip) {
			t.Fatalf("%s: %s vs %s", ip, a.Holder(ip), b.Holder(ip))
		}
	}
	if h := NewRing(nil).Holder(netip.MustParseAddr("1.2.3.4")); h != "" {
		t.Errorf("empty ring gave %q", h)
	}
}

// A node joining takes about 1/N of the IPs and moves nothing else; every
// node gets a fair share.
func TestRingMovesFewAndSpreads(t *testing.T) {
	const n, m = 10, 2000
	before := NewRing(nodes(n))
	after := NewRing(append(nodes(n), "new"))
	moved, share := 0, map[string]int{}
	for _, ip := range ips(m) {
		b, a := before.Holder(ip), after.Holder(ip)
		share[b]++
		if a != b {
			moved++
			if a != "new" {
				t.Fatalf("%s moved from %s to %s, not to the new node", ip, b, a)
			}
		}
	}
	if lo, hi := m/(n+1)/2, 2*m/(n+1); moved < lo || moved > hi {
		t.Errorf("%d of %d IPs moved to the new node, want about %d", moved, m, m/(n+1))
	}
	for node, c := range share {
		if c < m/n/2 || c > 2*m/n {
			t.Errorf("%s holds %d of %d IPs, want about %d", node, c, m, m/n)
		}
	}
	// Removing a node moves only its IPs.
	less := NewRing(nodes(n - 1))
	for _, ip := range ips(m) {
		if b := before.Holder(ip); b != fmt.Sprintf("node-%d", n-1) && less.Holder(ip) != b {
			t.Fatalf("%s moved from %s though %s stayed", ip, b, b)
		}
	}
}

// BenchmarkHolder is the placement decision with 1,000 nodes for 1,000
// Egress IPs (reported per IP); Antrea's ShouldSelectIP is about 128 ns
// at 10k nodes.
func BenchmarkHolder(b *testing.B) {
	r := NewRing(nodes(1000))
	as := ips(1000)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		_ = r.Holder(as[i%len(as)])
	}
}

// BenchmarkNewRing is the cost of a membership change: rebuilding the ring
// of 1,000 nodes.
func BenchmarkNewRing(b *testing.B) {
	ns := nodes(1000)
	for b.Loop() {
		_ = NewRing(ns)
	}
}
