package egress

import (
	"fmt"
	"math/big"
	"net/netip"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
)

// Range is an inclusive range of addresses of one family.
type Range struct{ First, Last netip.Addr }

// Contains says whether a is in r.
func (r Range) Contains(a netip.Addr) bool {
	a = a.Unmap()
	return a.BitLen() == r.First.BitLen() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// Size is the number of addresses in r, capped at max.
func (r Range) Size(max int64) int64 {
	f, l := new(big.Int).SetBytes(r.First.AsSlice()), new(big.Int).SetBytes(r.Last.AsSlice())
	n := new(big.Int).Sub(l, f)
	n.Add(n, big.NewInt(1))
	if !n.IsInt64() || n.Int64() > max {
		return max
	}
	return n.Int64()
}

// ParseRanges turns a pool's ipRanges into Ranges; an error names the
// entry and what is wrong with it. IPv4 CIDRs wider than /31 leave out
// their network and broadcast addresses.
func ParseRanges(in []crdv1.IPRange) ([]Range, error) {
	if len(in) == 0 {
		return nil, fmt.Errorf("ipRanges is empty; give at least one cidr or start/end")
	}
	var out []Range
	for i, r := range in {
		switch {
		case r.CIDR != "" && (r.Start != "" || r.End != ""):
			return nil, fmt.Errorf("ipRanges[%d]: give either cidr or start/end, not both", i)
		case r.CIDR != "":
			p, err := netip.ParsePrefix(r.CIDR)
			if err != nil {
				return nil, fmt.Errorf("ipRanges[%d].cidr %q: %v", i, r.CIDR, err)
			}
			p = p.Masked()
			first, last := p.Addr(), lastOf(p)
			if p.Addr().Is4() && p.Bits() < 31 {
				first, last = first.Next(), last.Prev()
			}
			out = append(out, Range{first, last})
		case r.Start != "" && r.End != "":
			s, err := netip.ParseAddr(r.Start)
			if err != nil {
				return nil, fmt.Errorf("ipRanges[%d].start %q: %v", i, r.Start, err)
			}
			e, err := netip.ParseAddr(r.End)
			if err != nil {
				return nil, fmt.Errorf("ipRanges[%d].end %q: %v", i, r.End, err)
			}
			s, e = s.Unmap(), e.Unmap()
			if s.BitLen() != e.BitLen() {
				return nil, fmt.Errorf("ipRanges[%d]: start %s and end %s are of different families", i, s, e)
			}
			if e.Less(s) {
				return nil, fmt.Errorf("ipRanges[%d]: end %s is before start %s", i, e, s)
			}
			out = append(out, Range{s, e})
		default:
			return nil, fmt.Errorf("ipRanges[%d]: give a cidr, or both start and end", i)
		}
	}
	return out, nil
}

// lastOf is the last address of p.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
