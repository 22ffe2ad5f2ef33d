package ifstore

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var addrs = cmpopts.EquateComparable(netip.Addr{})

func rec(id string, ofport uint32, ip string) Interface {
	return Interface{
		PodNamespace: "default", PodName: "p-" + id, ContainerID: id, IfName: "eth0",
		HostIfName: "sy" + id, OFPort: ofport, MAC: "0a:58:0a:f4:01:05",
		IPs: []netip.Addr{netip.MustParseAddr(ip)}, Created: time.Unix(1, 0).UTC(),
	}
}

func TestPersistAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "interfaces.json")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := rec("a", 3, "10.0.0.2"), rec("b", 4, "10.0.0.3")
	for _, r := range []Interface{a, b} {
		if err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := s.Delete(a.Key()); err != nil || !ok {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if _, ok, err := s.Delete(a.Key()); err != nil || ok {
		t.Fatalf("second Delete = %v, %v; want idempotent false, nil", ok, err)
	}
	s2, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Interface{b}, s2.List(), addrs); diff != "" {
		t.Errorf("after reopen (-want +got):\n%s", diff)
	}
}

func TestOpenRejectsBadFiles(t *testing.T) {
	tests := []struct{ name, content, want string }{
		{"corrupt", `{"version":1,"interfaces":[`, "is corrupt"},
		{"future", `{"version":7,"interfaces":[]}`, "version 7"},
		{"incomplete record", `{"version":1,"interfaces":[{"containerID":"x","ifName":"eth0"}]}`, "lacks hostIfName, podNamespace, podName"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.json")
			os.WriteFile(path, []byte(tc.content), 0o600)
			_, err := Open(path, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestFailedPutChangesNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "s.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(rec("a", 3, "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	// Remove the directory under the store: the next write cannot land.
	os.RemoveAll(dir)
	if err := s.Put(rec("b", 4, "10.0.0.3")); err == nil {
		t.Fatal("Put into a vanished directory succeeded")
	}
	if got := len(s.List()); got != 1 {
		t.Errorf("store holds %d records after a failed Put, want 1", got)
	}
}

func TestSubscribeReplaysThenStreamsInOrder(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Put(rec("a", 3, "10.0.0.2"))
	var mu sync.Mutex
	var got []string
	all := make(chan struct{})
	stop := s.Subscribe(func(_ context.Context, e Event) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e.Kind.String()+" "+e.Interface.ContainerID)
		if len(got) == 4 {
			close(all)
		}
	})
	defer stop()
	s.Put(rec("b", 4, "10.0.0.3"))
	s.Delete(Key{"a", "eth0"})
	s.Put(rec("c", 5, "10.0.0.4"))
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting 10s for 4 events")
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"added a", "added b", "deleted a", "added c"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

type ports map[string]uint32

func (p ports) OFPort(_ context.Context, name string) (uint32, bool, error) {
	n, ok := p[name]
	return n, ok, nil
}

func TestReconcile(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	keep, gone, moved := rec("keep", 3, "10.0.0.2"), rec("gone", 4, "10.0.0.3"), rec("moved", 5, "10.0.0.4")
	for _, r := range []Interface{keep, gone, moved} {
		s.Put(r)
	}
	rep, err := s.Reconcile(context.Background(), ports{"sykeep": 3, "symoved": 9})
	if err != nil {
		t.Fatal(err)
	}
	moved.OFPort = 9
	want := Report{
		Stale:      []Interface{gone},
		Renumbered: []Interface{moved},
	}
	if diff := cmp.Diff(want, rep, addrs); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Interface{keep, moved}, s.List(), addrs); diff != "" {
		t.Errorf("store after reconcile (-want +got):\n%s", diff)
	}
}

// BenchmarkPut records one attachment into a store that already holds n,
// as a CNI ADD does, and removes it again (a DEL).
func BenchmarkPut(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "interfaces.json"), slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				if err := s.Put(rec(strconv.Itoa(i), uint32(i+2), "10.0.0.2")); err != nil {
					b.Fatal(err)
				}
			}
			r := rec("new", 1000, "10.0.1.2")
			b.ResetTimer()
			for range b.N {
				if err := s.Put(r); err != nil {
					b.Fatal(err)
				}
				if _, _, err := s.Delete(r.Key()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
