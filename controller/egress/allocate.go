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
	// Had is status.egressIP, the address allocated before (invalid: none).
	Had netip.Addr
}

// Result is what an Egress gets: IP when allocated, otherwise Reason and
// Message say why not.
type Result struct {
	IP      netip.Addr
	Reason  string
	Message string
}

// Allocated says whether the Egress got an IP.
func (r Result) Allocated() bool { return r.IP.IsValid() }

// Usage counts a pool's addresses.
type Usage struct{ Total, Used int32 }

// Allocate gives each request its IP. It is deterministic and keeps what
// was allocated before: first every Egress that asks for a fixed IP,
// oldest first (a second Egress asking for a taken IP gets IPConflict),
// then every Egress that already had an IP from its pool keeps it, then
// the rest take the lowest free address of their pool, oldest first
// (PoolExhausted when none is left).
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
		if !r.Want.Unmap().Is4() {
			out[r.Name] = Result{Reason: crdv1.ReasonIPv6NotSupported,
				Message: fmt.Sprintf("spec.egressIP %s is IPv6; Switchyard's Egress handles IPv4 only so far: request an IPv4 address", r.Want)}
			continue
		}
		if r.Pool != "" {
			p, ok := byName[r.Pool]
			if res, bad := poolProblem(r, p, ok); bad {
				out[r.Name] = res
				continue
			}
			if !inRanges(p.Ranges, r.Want) {
				out[r.Name] = Result{Reason: crdv1.ReasonIPOutsidePool,
					Message: fmt.Sprintf("spec.egressIP %s is not in ExternalIPPool %s; pick an address of the pool's ipRanges or drop spec.egressIP", r.Want, r.Pool)}
				continue
			}
		}
		if other, ok := taken[r.Want]; ok {
			out[r.Name] = Result{Reason: crdv1.ReasonIPConflict,
				Message: fmt.Sprintf("spec.egressIP %s is already allocated to Egress %s; pick another address", r.Want, other)}
			continue
		}
		taken[r.Want] = r.Name
		out[r.Name] = Result{IP: r.Want, Reason: crdv1.ReasonAllocated, Message: "the requested IP is allocated"}
	}
	// 2. Pool IPs allocated before stay.
	var fresh []Request
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
		if r.Had.IsValid() && r.Had.Unmap().Is4() && inRanges(p.Ranges, r.Had) {
			if _, dup := taken[r.Had]; !dup {
				taken[r.Had] = r.Name
				out[r.Name] = Result{IP: r.Had, Reason: crdv1.ReasonAllocated, Message: "allocated from ExternalIPPool " + r.Pool}
				continue
			}
		}
		fresh = append(fresh, r)
	}
	// 3. The rest take the lowest free address.
	for _, r := range fresh {
		ip, ok := lowestFree(byName[r.Pool].Ranges, taken)
		if !ok && !hasIPv4(byName[r.Pool].Ranges) {
			out[r.Name] = Result{Reason: crdv1.ReasonIPv6NotSupported,
				Message: fmt.Sprintf("ExternalIPPool %s has only IPv6 ranges; Switchyard's Egress handles IPv4 only so far: add an IPv4 range", r.Pool)}
			continue
		}
		if !ok {
			out[r.Name] = Result{Reason: crdv1.ReasonPoolExhausted,
				Message: fmt.Sprintf("ExternalIPPool %s has no free address; add ipRanges to it or delete an Egress that uses it", r.Pool)}
			continue
		}
		taken[ip] = r.Name
		out[r.Name] = Result{IP: ip, Reason: crdv1.ReasonAllocated, Message: "allocated from ExternalIPPool " + r.Pool}
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

func poolProblem(r Request, p Pool, ok bool) (Result, bool) {
	if !ok {
		return Result{Reason: crdv1.ReasonPoolNotFound, Message: fmt.Sprintf("ExternalIPPool %s does not exist; create it or fix spec.externalIPPool", r.Pool)}, true
	}
	if p.Err != nil {
		return Result{Reason: crdv1.ReasonPoolNotFound, Message: fmt.Sprintf("ExternalIPPool %s is invalid: %v", r.Pool, p.Err)}, true
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

// lowestFree walks the ranges in order; it visits at most the taken
// addresses of a range plus one, so it is cheap for large ranges.
// IPv6 ranges are skipped: the datapath side of Egress is IPv4 only.
func lowestFree(rs []Range, taken map[netip.Addr]string) (netip.Addr, bool) {
	for _, r := range rs {
		if !r.First.Is4() {
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

func hasIPv4(rs []Range) bool {
	for _, r := range rs {
		if r.First.Is4() {
			return true
		}
	}
	return false
}
