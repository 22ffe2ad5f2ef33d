package ipam

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
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
	if h := a.held(k); len(h) > 0 {
		return nil, h, nil
	}
	var out []Lease
	for i, al := range a.allocs {
		ipc, err := al.Get(k.ContainerID, k.IfName, nil)
		if err != nil {
			if rerr := a.store.ReleaseByID(k.ContainerID, k.IfName); rerr != nil {
				err = errors.Join(err, fmt.Errorf("releasing partial allocation: %w", rerr))
			}
			if strings.Contains(err.Error(), "no IP addresses available") {
				return nil, nil, &sdk.CNIError{Code: cnicode.IPAMExhausted, Msg: fmt.Sprintf("pod CIDR %s of this node is exhausted", a.cidrs[i]), Details: "no address is free for a new pod; delete unused pods or give the node a larger pod CIDR"}
			}
			return nil, nil, fmt.Errorf("ipam: allocating from %s for %s/%s: %w", a.cidrs[i], k.ContainerID, k.IfName, err)
		}
		addr, _ := netip.AddrFromSlice(ipc.Address.IP)
		out = append(out, Lease{Address: netip.PrefixFrom(addr.Unmap(), a.cidrs[i].Bits()), Gateway: a.gws[i]})
	}
	return out, nil, nil
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

// held returns the addresses the attachment holds; callers hold mu.
func (a *Allocator) held(k Key) []netip.Addr {
	var out []netip.Addr
	for _, ip := range a.store.GetByID(k.ContainerID, k.IfName) {
		if addr, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, addr.Unmap())
		}
	}
	return out
}

// Get returns the addresses the attachment holds.
func (a *Allocator) Get(k Key) []netip.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.store.Lock()
	defer a.store.Unlock()
	return a.held(k)
}

// Release frees the attachment's addresses; releasing nothing is fine.
func (a *Allocator) Release(k Key) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.store.Lock()
	defer a.store.Unlock()
	if err := a.store.ReleaseByID(k.ContainerID, k.IfName); err != nil {
		return fmt.Errorf("ipam: releasing %s/%s: %w", k.ContainerID, k.IfName, err)
	}
	return nil
}

// Allocations lists every attachment holding addresses.
func (a *Allocator) Allocations() (map[Key][]netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.store.Lock()
	defer a.store.Unlock()
	entries, err := os.ReadDir(a.dir)
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
		data, err := os.ReadFile(filepath.Join(a.dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("ipam: %w", err)
		}
		id, ifname, _ := strings.Cut(string(data), disk.LineBreak)
		k := Key{ContainerID: strings.TrimSpace(id), IfName: strings.TrimSpace(ifname)}
		out[k] = append(out[k], addr)
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
	return a.store.GC(atts)
}

func prefixToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
