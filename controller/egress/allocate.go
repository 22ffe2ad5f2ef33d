package egress

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
)

// Pool is a pool as Allocate needs it.
type Pool struct {
	Name   string
	Ranges []Range
	// Err is why the pool's spec is unusable (nil if it is fine).
	Err error
}

// Request is an Egress as Allocate needs it.
type Request struct {
	Name    string
	Created time.Time
	// Pool is spec.externalIPPool ("" for none).
	Pool string
	// Want is spec.egressIP (invalid: none asked).
	Want netip.Addr
	// WantRaw is spec.egressIP as written, for messages.
	WantRaw string
	// Had are status.egressIPs (or status.egressIP), the addresses
	// allocated before.
	Had []netip.Addr
}

// Result is what an Egress gets: IPs when allocated (one per family of its
// pool, IPv4 first, or the one it asked for), otherwise Reason and
// Message say why not.
type Result struct {
	IPs     []netip.Addr
	Reason  string
	Message string
}

// Allocated says whether the Egress got an IP.
func (r Result) Allocated() bool { return len(r.IPs) > 0 }

// Usage counts a pool's addresses.
type Usage struct{ Total, Used int32 }

// Allocate gives each request its IPs. It is deterministic and keeps what
// was allocated before: first every Egress that asks for a fixed IP,
// oldest first (a second Egress asking for a taken IP gets IPConflict),
// then every Egress that already had an IP from its pool keeps it, then
// the rest take the lowest free address of their pool, oldest first
// (PoolExhausted when none is left). A pool with ranges of both families
// gives each Egress one address of each; a family with no free address
// leaves the Egress without any (PoolExhausted), never half-allocated.
func Allocate(pools []Pool, reqs []Request) (map[string]Result, map[string]Usage) {
	byName := map[string]Pool{}
	for _, p := range pools {
		byName[p.Name] = p
	}
	reqs = slices.Clone(reqs)
	slices.SortFunc(reqs, func(a, b Request) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	out := map[string]Result{}
	taken := map[netip.Addr]string{}
	// 1. Fixed IPs.
	for _, r := range reqs {
		if r.WantRaw == "" {
			continue
		}
		if !r.Want.IsValid() {
			out[r.Name] = Result{Reason: crdv1.ReasonInvalidIP, Message: fmt.Sprintf("spec.egressIP %q is not an IP address", r.WantRaw)}
			continue
		}
		want := r.Want.Unmap()
		if want.Zone() != "" || want.IsUnspecified() || want.IsLoopback() || want.IsMulticast() || want.IsLinkLocalUnicast() {
			out[r.Name] = Result{Reason: crdv1.ReasonInvalidIP,
				Message: fmt.Sprintf("spec.egressIP %s cannot be a source address on the underlay; request a unicast address of the nodes' network", r.WantRaw)}
			continue
		}
		if r.Pool != "" {
			p, ok := byName[r.Pool]
			if res, bad := poolProblem(r, p, ok); bad {
				out[r.Name] = res
				continue
			}
			if !inRanges(p.Ranges, want) {
				out[r.Name] = Result{Reason: crdv1.ReasonIPOutsidePool,
					Message: fmt.Sprintf("spec.egressIP %s is not in ExternalIPPool %s; pick an address of the pool's ipRanges or drop spec.egressIP", want, r.Pool)}
				continue
			}
		}
		if other, ok := taken[want]; ok {
			out[r.Name] = Result{Reason: crdv1.ReasonIPConflict,
				Message: fmt.Sprintf("spec.egressIP %s is already allocated to Egress %s; pick another address", want, other)}
			continue
		}
		taken[want] = r.Name
		out[r.Name] = Result{IPs: []netip.Addr{want}, Reason: crdv1.ReasonAllocated, Message: "the requested IP is allocated"}
	}
	// 2. Pool IPs allocated before stay, family by family; 3. the rest
	// take the lowest free address. An Egress keeps the address it had of
	// one family even when it needs a fresh one of the other.
	kept := map[string][]netip.Addr{}
	var pending []Request
	for _, r := range reqs {
		if r.WantRaw != "" {
			continue
		}
		if r.Pool == "" {
			out[r.Name] = Result{Reason: crdv1.ReasonNoIP, Message: "set spec.egressIP or spec.externalIPPool"}
			continue
		}
		p, ok := byName[r.Pool]
		if res, bad := poolProblem(r, p, ok); bad {
			out[r.Name] = res
			continue
		}
		for _, fam := range families(p.Ranges) {
			for _, had := range r.Had {
				had = had.Unmap()
				if had.BitLen() != fam || !inRanges(p.Ranges, had) {
					continue
				}
				if _, dup := taken[had]; !dup {
					taken[had] = r.Name
					kept[r.Name] = append(kept[r.Name], had)
				}
				break
			}
		}
		pending = append(pending, r)
	}
	for _, r := range pending {
		p := byName[r.Pool]
		ips := kept[r.Name]
		var missing []int
		for _, fam := range families(p.Ranges) {
			if slices.ContainsFunc(ips, func(a netip.Addr) bool { return a.BitLen() == fam }) {
				continue
			}
			ip, ok := lowestFree(p.Ranges, fam, taken)
			if !ok {
				missing = append(missing, fam)
				continue
			}
			taken[ip] = r.Name
			ips = append(ips, ip)
		}
		if len(missing) > 0 {
			for _, ip := range ips {
				delete(taken, ip)
			}
			out[r.Name] = Result{Reason: crdv1.ReasonPoolExhausted,
				Message: fmt.Sprintf("ExternalIPPool %s has no free %s address; add ipRanges to it or delete an Egress that uses it", r.Pool, familyName(missing))}
			continue
		}
		slices.SortFunc(ips, func(a, b netip.Addr) int { return a.BitLen() - b.BitLen() })
		out[r.Name] = Result{IPs: ips, Reason: crdv1.ReasonAllocated, Message: "allocated from ExternalIPPool " + r.Pool}
	}
	usage := map[string]Usage{}
	for _, p := range pools {
		var total int64
		for _, rg := range p.Ranges {
			total += rg.Size(math.MaxInt32)
		}
		u := Usage{Total: int32(min(total, math.MaxInt32))}
		for ip := range taken {
			if inRanges(p.Ranges, ip) {
				u.Used++
			}
		}
		usage[p.Name] = u
	}
	return out, usage
}

// families are the address families of the ranges as bit lengths, IPv4
// (32) before IPv6 (128).
func families(rs []Range) []int {
	var out []int
	for _, fam := range []int{32, 128} {
		if slices.ContainsFunc(rs, func(r Range) bool { return r.First.BitLen() == fam }) {
			out = append(out, fam)
		}
	}
	return out
}

func familyName(fams []int) string {
	var names []string
	for _, f := range fams {
		names = append(names, map[int]string{32: "IPv4", 128: "IPv6"}[f])
	}
	return strings.Join(names, " or ")
}

func poolProblem(r Request, p Pool, ok bool) (Result, bool) {
	if !ok {
		return Result{Reason: crdv1.ReasonPoolNotFound, Message: fmt.Sprintf("ExternalIPPool %s does not exist; create it or fix spec.externalIPPool", r.Pool)}, true
	}
	if p.Err != nil {
		return Result{Reason: crdv1.ReasonPoolInvalid, Message: fmt.Sprintf("ExternalIPPool %s is invalid: %v", r.Pool, p.Err)}, true
	}
	return Result{}, false
}

func inRanges(rs []Range, a netip.Addr) bool {
	for _, r := range rs {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// lowestFree walks the ranges of family fam (a bit length) in order; it
// visits at most the taken addresses of a range plus one, so it is cheap
// for large ranges.
func lowestFree(rs []Range, fam int, taken map[netip.Addr]string) (netip.Addr, bool) {
	for _, r := range rs {
		if r.First.BitLen() != fam {
			continue
		}
		for a := r.First; a.IsValid() && a.Compare(r.Last) <= 0; a = a.Next() {
			if _, t := taken[a]; !t {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}
