package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
)

func TestParseRanges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []crdv1.IPRange
		want    []Range
		wantErr string
	}{
		{"cidr leaves out network and broadcast", []crdv1.IPRange{{CIDR: "198.18.0.64/30"}},
			[]Range{{netip.MustParseAddr("198.18.0.65"), netip.MustParseAddr("198.18.0.66")}}, ""},
		{"start-end", []crdv1.IPRange{{Start: "198.18.0.100", End: "198.18.0.101"}},
			[]Range{{netip.MustParseAddr("198.18.0.100"), netip.MustParseAddr("198.18.0.101")}}, ""},
		{"ipv6 cidr", []crdv1.IPRange{{CIDR: "fd00:18::/127"}},
			[]Range{{netip.MustParseAddr("fd00:18::"), netip.MustParseAddr("fd00:18::1")}}, ""},
		{"empty", nil, nil, "ipRanges is empty"},
		{"both", []crdv1.IPRange{{CIDR: "10.0.0.0/24", Start: "10.0.0.1"}}, nil, "ipRanges[0]: give either cidr or start/end, not both"},
		{"bad cidr", []crdv1.IPRange{{CIDR: "10.0.0.0/33"}}, nil, `ipRanges[0].cidr "10.0.0.0/33"`},
		{"reversed", []crdv1.IPRange{{Start: "10.0.0.9", End: "10.0.0.1"}}, nil, "ipRanges[0]: end 10.0.0.1 is before start 10.0.0.9"},
		{"mixed families", []crdv1.IPRange{{Start: "10.0.0.1", End: "fd00::1"}}, nil, "different families"},
		{"half", []crdv1.IPRange{{Start: "10.0.0.1"}}, nil, "give a cidr, or both start and end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRanges(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestAllocate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ip := netip.MustParseAddr
	pool := Pool{Name: "p", Ranges: []Range{{ip("198.18.0.100"), ip("198.18.0.101")}}}
	v6 := Pool{Name: "v6", Ranges: []Range{{ip("fd00::1"), ip("fd00::2")}}}
	mixed := Pool{Name: "mixed", Ranges: []Range{{ip("fd00::1"), ip("fd00::2")}, {ip("198.18.1.1"), ip("198.18.1.1")}}}
	type want struct {
		ip     string
		reason string
	}
	for _, tc := range []struct {
		name  string
		reqs  []Request
		want  map[string]want
		usage Usage
	}{
		{"lowest free, oldest first",
			[]Request{{Name: "b", Created: t0.Add(time.Second), Pool: "p"}, {Name: "a", Created: t0, Pool: "p"}},
			map[string]want{"a": {"198.18.0.100", crdv1.ReasonAllocated}, "b": {"198.18.0.101", crdv1.ReasonAllocated}}, Usage{2, 2}},
		{"exhausted",
			[]Request{{Name: "a", Created: t0, Pool: "p"}, {Name: "b", Created: t0, Pool: "p"}, {Name: "c", Created: t0, Pool: "p"}},
			map[string]want{"a": {"198.18.0.100", crdv1.ReasonAllocated}, "b": {"198.18.0.101", crdv1.ReasonAllocated}, "c": {"", crdv1.ReasonPoolExhausted}}, Usage{2, 2}},
		{"status kept across a restart, even if younger",
			[]Request{{Name: "a", Created: t0, Pool: "p"}, {Name: "b", Created: t0.Add(time.Second), Pool: "p", Had: []netip.Addr{ip("198.18.0.100")}}},
			map[string]want{"a": {"198.18.0.101", crdv1.ReasonAllocated}, "b": {"198.18.0.100", crdv1.ReasonAllocated}}, Usage{2, 2}},
		{"fixed IP beats a kept one",
			[]Request{{Name: "a", Created: t0, Pool: "p", Had: []netip.Addr{ip("198.18.0.100")}}, {Name: "b", Created: t0.Add(time.Second), Pool: "p", Want: ip("198.18.0.100"), WantRaw: "198.18.0.100"}},
			map[string]want{"a": {"198.18.0.101", crdv1.ReasonAllocated}, "b": {"198.18.0.100", crdv1.ReasonAllocated}}, Usage{2, 2}},
		{"duplicate request: the older wins",
			[]Request{{Name: "b", Created: t0.Add(time.Second), Want: ip("198.18.0.7"), WantRaw: "198.18.0.7"}, {Name: "a", Created: t0, Want: ip("198.18.0.7"), WantRaw: "198.18.0.7"}},
			map[string]want{"a": {"198.18.0.7", crdv1.ReasonAllocated}, "b": {"", crdv1.ReasonIPConflict}}, Usage{2, 0}},
		{"outside the pool",
			[]Request{{Name: "a", Pool: "p", Want: ip("198.18.0.7"), WantRaw: "198.18.0.7"}},
			map[string]want{"a": {"", crdv1.ReasonIPOutsidePool}}, Usage{2, 0}},
		{"unknown pool", []Request{{Name: "a", Pool: "nope"}}, map[string]want{"a": {"", crdv1.ReasonPoolNotFound}}, Usage{2, 0}},
		{"invalid pool", []Request{{Name: "a", Pool: "bad"}}, map[string]want{"a": {"", crdv1.ReasonPoolInvalid}}, Usage{2, 0}},
		{"not an IP", []Request{{Name: "a", WantRaw: "ten"}}, map[string]want{"a": {"", crdv1.ReasonInvalidIP}}, Usage{2, 0}},
		{"nothing asked", []Request{{Name: "a"}}, map[string]want{"a": {"", crdv1.ReasonNoIP}}, Usage{2, 0}},
		{"an IPv6 egressIP is allocated",
			[]Request{{Name: "a", Want: ip("fd00::5"), WantRaw: "fd00::5"}},
			map[string]want{"a": {"fd00::5", crdv1.ReasonAllocated}}, Usage{2, 0}},
		{"a link-local egressIP is refused",
			[]Request{{Name: "a", Want: ip("fe80::5"), WantRaw: "fe80::5"}},
			map[string]want{"a": {"", crdv1.ReasonInvalidIP}}, Usage{2, 0}},
		{"a pool of IPv6 ranges gives IPv6 addresses",
			[]Request{{Name: "a", Pool: "v6"}, {Name: "b", Created: t0.Add(time.Second), Pool: "v6"}},
			map[string]want{"a": {"fd00::1", crdv1.ReasonAllocated}, "b": {"fd00::2", crdv1.ReasonAllocated}}, Usage{2, 0}},
		{"a dual-stack pool gives one address of each family, IPv4 first, keeping what it had",
			[]Request{{Name: "a", Pool: "mixed", Had: []netip.Addr{ip("fd00::2")}}},
			map[string]want{"a": {"198.18.1.1,fd00::2", crdv1.ReasonAllocated}}, Usage{2, 0}},
		{"a dual-stack pool out of one family allocates nothing, and leaks nothing",
			[]Request{{Name: "a", Created: t0, Pool: "mixed"}, {Name: "b", Created: t0.Add(time.Second), Pool: "mixed"},
				{Name: "c", Created: t0.Add(2 * time.Second), Want: ip("fd00::2"), WantRaw: "fd00::2"}},
			map[string]want{"a": {"198.18.1.1,fd00::1", crdv1.ReasonAllocated}, "b": {"", crdv1.ReasonPoolExhausted},
				"c": {"fd00::2", crdv1.ReasonAllocated}}, Usage{2, 0}},
		{"a kept IP outside a shrunk pool is replaced",
			[]Request{{Name: "a", Pool: "p", Had: []netip.Addr{ip("198.18.0.9")}}},
			map[string]want{"a": {"198.18.0.100", crdv1.ReasonAllocated}}, Usage{2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := Pool{Name: "bad", Err: errors.New("subnetInfo.gateway 10.0.0.1 is not in the ranges' subnet")}
			res, usage := Allocate([]Pool{pool, v6, mixed, bad}, tc.reqs)
			got := map[string]want{}
			for n, r := range res {
				w := want{reason: r.Reason}
				var ips []string
				for _, a := range r.IPs {
					ips = append(ips, a.String())
				}
				w.ip = strings.Join(ips, ",")
				if r.Message == "" {
					t.Errorf("%s: empty message", n)
				}
				got[n] = w
			}
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); d != "" {
				t.Errorf("results (-want +got):\n%s", d)
			}
			if r, ok := res["b"]; ok && r.Reason == crdv1.ReasonPoolExhausted && !strings.Contains(r.Message, "IPv") {
				t.Errorf("exhausted message %q names no family", r.Message)
			}
			if usage["p"] != tc.usage {
				t.Errorf("usage %+v, want %+v", usage["p"], tc.usage)
			}
		})
	}
}

// FuzzParseRanges: ipRanges come from users; whatever they write, parsing
// never panics, and every range it accepts is ordered and of one family.
func FuzzParseRanges(f *testing.F) {
	f.Add("198.18.0.64/28", "", "")
	f.Add("", "10.0.0.1", "10.0.0.9")
	f.Add("fd00::/120", "", "")
	f.Add("", "10.0.0.9", "fd00::1")
	f.Fuzz(func(t *testing.T, cidr, start, end string) {
		rs, err := ParseRanges([]crdv1.IPRange{{CIDR: cidr, Start: start, End: end}})
		if err != nil {
			return
		}
		for _, r := range rs {
			if r.First.BitLen() != r.Last.BitLen() || r.Last.Less(r.First) {
				t.Fatalf("%q %q %q: bad range %v", cidr, start, end, r)
			}
			if r.Size(1<<20) < 1 {
				t.Fatalf("empty range %v", r)
			}
		}
	})
}
