package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"switchyard.dev/switchyard/plugins/podnet/cnicode"
	"switchyard.dev/switchyard/sdk"
)

var cmpNet = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

func open(t *testing.T, dir string, cidrs ...string) *Allocator {
	t.Helper()
	var ps []netip.Prefix
	for _, c := range cidrs {
		ps = append(ps, netip.MustParsePrefix(c))
	}
	a, err := New(dir, "switchyard", ps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func TestDualStackAllocateReleasePersist(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, "10.244.1.0/24", "fd00:10:244:1::/64")
	k := Key{"c1", "eth0"}
	got, err := a.Allocate(k)
	if err != nil {
		t.Fatal(err)
	}
	want := []Lease{
		{netip.MustParsePrefix("10.244.1.2/24"), netip.MustParseAddr("10.244.1.1")},
		{netip.MustParsePrefix("fd00:10:244:1::2/64"), netip.MustParseAddr("fd00:10:244:1::1")},
	}
	if diff := cmp.Diff(want, got, cmpNet); diff != "" {
		t.Errorf("Allocate (-want +got):\n%s", diff)
	}
	// Retried ADD after a crash: same addresses, no second allocation.
	again, err := a.Allocate(k)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, again, cmpNet); diff != "" {
		t.Errorf("repeated Allocate (-want +got):\n%s", diff)
	}
	// A new allocator over the same directory (plugin restart) sees it.
	b := open(t, dir, "10.244.1.0/24", "fd00:10:244:1::/64")
	allocs, err := b.Allocations()
	if err != nil {
		t.Fatal(err)
	}
	wantAllocs := map[Key][]netip.Addr{k: {netip.MustParseAddr("10.244.1.2"), netip.MustParseAddr("fd00:10:244:1::2")}}
	if diff := cmp.Diff(wantAllocs, allocs, cmpNet, cmpopts.SortSlices(netip.Addr.Less)); diff != "" {
		t.Errorf("Allocations after reopen (-want +got):\n%s", diff)
	}
	if err := b.Release(k); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(k); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if held := b.Get(k); len(held) != 0 {
		t.Errorf("after Release the attachment still holds %v", held)
	}
	// The files are gone too: the next allocator over the directory finds
	// nothing held.
	a.Close()
	b.Close()
	if held := open(t, dir, "10.244.1.0/24", "fd00:10:244:1::/64").Get(k); len(held) != 0 {
		t.Errorf("after Release and a reopen the attachment still holds %v", held)
	}
}

func TestExhaustion(t *testing.T) {
	a := open(t, t.TempDir(), "10.244.9.0/30")
	if _, err := a.Allocate(Key{"c1", "eth0"}); err != nil {
		t.Fatal(err)
	}
	_, err := a.Allocate(Key{"c2", "eth0"})
	var e *sdk.CNIError
	if ok := errors.As(err, &e); !ok || e.Code != cnicode.IPAMExhausted {
		t.Fatalf("err = %v, want IPAM exhausted", err)
	}
	if held := a.Get(Key{"c2", "eth0"}); len(held) != 0 {
		t.Errorf("failed allocation left %v behind", held)
	}
}

func TestPartialDualStackFailureReleasesAll(t *testing.T) {
	// The IPv6 range has room, the IPv4 one is full: nothing may be kept.
	a := open(t, t.TempDir(), "fd00::/120", "10.244.9.0/30")
	a.Allocate(Key{"c1", "eth0"})
	if _, err := a.Allocate(Key{"c2", "eth0"}); err == nil {
		t.Fatal("second allocation succeeded in a full IPv4 range")
	}
	if held := a.Get(Key{"c2", "eth0"}); len(held) != 0 {
		t.Errorf("failed dual-stack allocation kept %v", held)
	}
	// Nor on disk: the IPv6 reservation file is removed again.
	allocs, err := a.Allocations()
	if err != nil {
		t.Fatal(err)
	}
	if held := allocs[Key{"c2", "eth0"}]; len(held) != 0 {
		t.Errorf("failed dual-stack allocation left reservation files for %v", held)
	}
}

// The index by attachment follows the store through GC, which removes
// files behind it, and through a reopen.
func TestGCKeepsIndexAndDiskInStep(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, "10.244.3.0/24")
	for _, c := range []string{"c1", "c2", "c3"} {
		if _, err := a.Allocate(Key{c, "eth0"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.GC([]Key{{"c1", "eth0"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"c2", "c3"} {
		if held := a.Get(Key{c, "eth0"}); len(held) != 0 {
			t.Errorf("%s holds %v after a GC that did not list it", c, held)
		}
	}
	if _, err := a.Allocate(Key{"c4", "eth0"}); err != nil {
		t.Fatal(err)
	}
	want := map[Key][]netip.Addr{
		{"c1", "eth0"}: {netip.MustParseAddr("10.244.3.2")},
		{"c4", "eth0"}: {netip.MustParseAddr("10.244.3.5")}, // round robin: after c3's .4
	}
	for name, al := range map[string]*Allocator{"the same allocator": a, "a reopened allocator": open(t, dir, "10.244.3.0/24")} {
		got, err := al.Allocations()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpNet); diff != "" {
			t.Errorf("%s: Allocations (-want +got):\n%s", name, diff)
		}
		for k, addrs := range want {
			if diff := cmp.Diff(addrs, al.Get(k), cmpNet); diff != "" {
				t.Errorf("%s: Get(%v) (-want +got):\n%s", name, k, diff)
			}
		}
	}
}

func TestConcurrentAllocationsAreUnique(t *testing.T) {
	a := open(t, t.TempDir(), "10.244.2.0/24")
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[netip.Prefix]string{}
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("c%d", i)
			l, err := a.Allocate(Key{id, "eth0"})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if other, dup := seen[l[0].Address]; dup {
				t.Errorf("%s given to both %s and %s", l[0].Address, other, id)
			}
			seen[l[0].Address] = id
		}()
	}
	wg.Wait()
	if len(seen) != 50 {
		t.Errorf("%d distinct addresses for 50 pods", len(seen))
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name  string
		cidrs []netip.Prefix
	}{
		{"none", nil},
		{"two v4", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("10.0.1.0/24")}},
		{"too small", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/31")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if a, err := New(t.TempDir(), "sy", tc.cidrs); err == nil {
				a.Close()
				t.Fatal("New succeeded")
			}
		})
	}
}
