package ipam

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/allocator"
	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/disk"

	"switchyard.dev/switchyard/plugins/podnet/cnicode"
	"switchyard.dev/switchyard/sdk"
)

// Lease is one address given to a pod.
type Lease struct {
	// Address is the pod's IP with the pod CIDR's prefix length.
	Address netip.Prefix
	Gateway netip.Addr
}

// Key names an attachment.
type Key struct{ ContainerID, IfName string }

// Allocator is safe for concurrent use.
type Allocator struct {
	// mu serializes in-process users: the store's file lock is held per open
	// file, so two goroutines sharing one Store would not exclude each other.
	mu     sync.Mutex
	dir    string
	cidrs  []netip.Prefix
	gws    []netip.Addr
	allocs []*allocator.IPAllocator
	store  *disk.Store
	// byKey is the store's reservations by attachment, read from the
	// directory once at New and kept in step with every change this
	// Allocator makes. podnet is the directory's only writer, so the index
	// stays true, and an ADD or DEL no longer reads every reservation file
	// (the store's GetByID and ReleaseByID walk the whole directory: about
	// 1 ms per walk at 50 pods, two walks per ADD). Uniqueness never rests
	// on the index: a reservation is an O_EXCL file create.
	byKey map[Key][]netip.Addr
}

// New opens (creating if needed) the allocation store under dataDir/network
// for the given pod CIDRs, at most one per address family.
func New(dataDir, network string, podCIDRs []netip.Prefix) (*Allocator, error) {
	if len(podCIDRs) == 0 {
		return nil, errors.New("ipam: the node has no pod CIDR (spec.podCIDRs is empty); enable --allocate-node-cidrs on the controller manager or set podCIDRs in the agent config")
	}
	store, err := disk.New(network, dataDir)
	if err != nil {
		return nil, fmt.Errorf("ipam: opening allocation store: %w", err)
	}
	a := &Allocator{dir: filepath.Join(dataDir, network), store: store}
	seen := map[bool]bool{}
	for i, p := range podCIDRs {
		p = p.Masked()
		if seen[p.Addr().Is4()] {
			store.Close()
			return nil, fmt.Errorf("ipam: pod CIDRs %v hold two CIDRs of the same family; give at most one IPv4 and one IPv6", podCIDRs)
		}
		seen[p.Addr().Is4()] = true
		r := allocator.Range{Subnet: types.IPNet(*prefixToIPNet(p))}
		if err := r.Canonicalize(); err != nil {
			store.Close()
			return nil, fmt.Errorf("ipam: pod CIDR %s: %w", p, err)
		}
		gw, _ := netip.AddrFromSlice(r.Gateway)
		a.cidrs = append(a.cidrs, p)
		a.gws = append(a.gws, gw.Unmap())
		a.allocs = append(a.allocs, allocator.NewIPAllocator(&allocator.RangeSet{r}, store, i))
	}
	store.Lock()
	a.byKey, err = readReservations(a.dir)
	store.Unlock()
	if err != nil {
		store.Close()
		return nil, err
	}
	return a, nil
}

// Close releases the store's file handle.
func (a *Allocator) Close() error { return a.store.Close() }

// CIDRs returns the pod CIDRs, masked.
func (a *Allocator) CIDRs() []netip.Prefix { return a.cidrs }

// Gateways returns each CIDR's gateway address, in CIDR order.
func (a *Allocator) Gateways() []netip.Addr { return a.gws }

// Allocate returns one lease per pod CIDR for the attachment. It is
// idempotent: an attachment that already holds addresses (an ADD retried
// after a crash) gets the same ones back. Either every family is allocated
// or none is.
func (a *Allocator) Allocate(k Key) ([]Lease, error) {
	leases, held, err := a.AllocateNew(k)
	if len(held) > 0 {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.leasesFor(held)
	}
	return leases, err
}

// AllocateNew allocates for an attachment that should hold nothing yet:
// when it already does (what an ADD cut short left), it allocates nothing
// and returns what is held, for the caller to clean up first. One look at
// the store either way, where checking first would take two.
func (a *Allocator) AllocateNew(k Key) (leases []Lease, held []netip.Addr, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h := a.byKey[k]; len(h) > 0 {
		return nil, slices.Clone(h), nil
	}
	a.store.Lock()
	defer a.store.Unlock()
	var out []Lease
	var got []netip.Addr
	for i, al := range a.allocs {
		addr, err := a.reserve(al, i, k)
		if err != nil {
			if rerr := a.removeFiles(got); rerr != nil {
				err = errors.Join(err, fmt.Errorf("releasing partial allocation: %w", rerr))
			}
			return nil, nil, err
		}
		got = append(got, addr)
		out = append(out, Lease{Address: netip.PrefixFrom(addr, a.cidrs[i].Bits()), Gateway: a.gws[i]})
	}
	a.byKey[k] = got
	return out, nil, nil
}

// reserve takes the next free address of the i-th CIDR for k, round robin
// from the last one reserved, as host-local does; callers hold mu and the
// store's lock.
func (a *Allocator) reserve(al *allocator.IPAllocator, i int, k Key) (netip.Addr, error) {
	iter, err := al.GetIter()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("ipam: allocating from %s for %s/%s: %w", a.cidrs[i], k.ContainerID, k.IfName, err)
	}
	for {
		ipn, _ := iter.Next()
		if ipn == nil {
			return netip.Addr{}, &sdk.CNIError{Code: cnicode.IPAMExhausted, Msg: fmt.Sprintf("pod CIDR %s of this node is exhausted", a.cidrs[i]), Details: "no address is free for a new pod; delete unused pods or give the node a larger pod CIDR"}
		}
		ok, err := a.store.Reserve(k.ContainerID, k.IfName, ipn.IP, strconv.Itoa(i))
		if err != nil {
			return netip.Addr{}, fmt.Errorf("ipam: allocating from %s for %s/%s: %w", a.cidrs[i], k.ContainerID, k.IfName, err)
		}
		if ok {
			addr, _ := netip.AddrFromSlice(ipn.IP)
			return addr.Unmap(), nil
		}
	}
}

// removeFiles deletes the reservation files of addrs; one already gone is
// fine. Callers hold mu and the store's lock.
func (a *Allocator) removeFiles(addrs []netip.Addr) error {
	var errs []error
	for _, addr := range addrs {
		if err := os.Remove(disk.GetEscapedPath(a.dir, addr.String())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (a *Allocator) leasesFor(held []netip.Addr) ([]Lease, error) {
	var out []Lease
	for i, p := range a.cidrs {
		for _, ip := range held {
			if p.Contains(ip) {
				out = append(out, Lease{Address: netip.PrefixFrom(ip, p.Bits()), Gateway: a.gws[i]})
			}
		}
	}
	if len(out) != len(a.cidrs) {
		return nil, fmt.Errorf("ipam: attachment holds %v, which does not cover every pod CIDR %v; DEL it and ADD again", held, a.cidrs)
	}
	return out, nil
}

// Get returns the addresses the attachment holds.
func (a *Allocator) Get(k Key) []netip.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.byKey[k])
}

// Release frees the attachment's addresses; releasing nothing is fine.
func (a *Allocator) Release(k Key) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	held := a.byKey[k]
	if len(held) == 0 {
		return nil
	}
	a.store.Lock()
	defer a.store.Unlock()
	if err := a.removeFiles(held); err != nil {
		return fmt.Errorf("ipam: releasing %s/%s: %w", k.ContainerID, k.IfName, err)
	}
	delete(a.byKey, k)
	return nil
}

// Allocations lists every attachment holding addresses, as the store's
// directory has them.
func (a *Allocator) Allocations() (map[Key][]netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.store.Lock()
	defer a.store.Unlock()
	return readReservations(a.dir)
}

// readReservations reads every reservation file in dir; callers hold the
// store's lock.
func readReservations(dir string) (map[Key][]netip.Addr, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("ipam: %w", err)
	}
	out := map[Key][]netip.Addr{}
	for _, e := range entries {
		// Reservation files are named by the address (":" escaped as "_"
		// on Windows only); everything else is the store's bookkeeping.
		addr, err := netip.ParseAddr(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("ipam: %w", err)
		}
		id, ifname, _ := strings.Cut(string(data), disk.LineBreak)
		k := Key{ContainerID: strings.TrimSpace(id), IfName: strings.TrimSpace(ifname)}
		out[k] = append(out[k], addr)
	}
	for _, addrs := range out {
		slices.SortFunc(addrs, func(x, y netip.Addr) int { return cmp.Compare(x.BitLen(), y.BitLen()) })
	}
	return out, nil
}

// GC releases every allocation not held by one of the valid attachments.
func (a *Allocator) GC(valid []Key) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var atts []types.GCAttachment
	for _, k := range valid {
		atts = append(atts, types.GCAttachment{ContainerID: k.ContainerID, IfName: k.IfName})
	}
	a.store.Lock()
	defer a.store.Unlock()
	gcErr := a.store.GC(atts)
	// The store removed files behind the index: read it again.
	byKey, err := readReservations(a.dir)
	if err != nil {
		return errors.Join(gcErr, err)
	}
	a.byKey = byKey
	return gcErr
}

func prefixToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
