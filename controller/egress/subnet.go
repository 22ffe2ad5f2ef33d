package egress

import (
	"fmt"
	"net/netip"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
)

// Subnet is a pool's spec.subnetInfo once checked: the subnet the pool's
// addresses belong to and its router. The agent holding one of the
// addresses sends the Egress traffic of that address to Gateway.
type Subnet struct {
	// Prefix is the subnet, masked (198.18.1.0/24).
	Prefix netip.Prefix
	// Gateway is the subnet's router (198.18.1.1).
	Gateway netip.Addr
}

// IsValid says whether s is a subnet (the zero Subnet: the pool has no
// subnetInfo).
func (s Subnet) IsValid() bool { return s.Gateway.IsValid() && s.Prefix.IsValid() }

func (s Subnet) String() string {
	if !s.IsValid() {
		return "none"
	}
	return fmt.Sprintf("%s via %s", s.Prefix, s.Gateway)
}

// ParseSubnet checks a pool's subnetInfo against its ipRanges and returns
// the subnet (the zero Subnet when info is nil). The gateway must be an
// IPv4 address (IPv6 subnets are not routed yet), prefixLength must fit its family, every range must lie inside
// gateway/prefixLength, and neither the gateway nor (IPv4) the subnet's
// network and broadcast addresses may be in the ranges. An error says
// which field is wrong and how to fix it; ranges themselves are checked
// by ParseRanges.
func ParseSubnet(info *crdv1.SubnetInfo, ranges []crdv1.IPRange) (Subnet, error) {
	if info == nil {
		return Subnet{}, nil
	}
	rs, err := ParseRanges(ranges)
	if err != nil {
		return Subnet{}, err
	}
	gw, err := netip.ParseAddr(info.Gateway)
	if err != nil {
		return Subnet{}, fmt.Errorf("subnetInfo.gateway %q is not an IP address: give the address of the subnet's router, such as 198.18.1.1", info.Gateway)
	}
	gw = gw.Unmap()
	if gw.Zone() != "" {
		return Subnet{}, fmt.Errorf("subnetInfo.gateway %s has a zone: give the router's address without %%%s", gw, gw.Zone())
	}
	family, bits := "IPv4", gw.BitLen()
	if gw.Is6() {
		// The agents route an IPv4 subnet's traffic only; accepting an
		// IPv6 one would send its Egress traffic by the main table.
		return Subnet{}, fmt.Errorf("subnetInfo.gateway %s is IPv6; subnetInfo is supported for IPv4 pools only so far: drop subnetInfo from this IPv6 pool (its Egress traffic then follows the node's routes)", gw)
	}
	if info.PrefixLength < 1 || int(info.PrefixLength) > bits {
		return Subnet{}, fmt.Errorf("subnetInfo.prefixLength %d does not fit the %s gateway %s: give 1 to %d, the length of the subnet the pool's addresses are in",
			info.PrefixLength, family, gw, bits)
	}
	p := netip.PrefixFrom(gw, int(info.PrefixLength)).Masked()
	sub := Subnet{Prefix: p, Gateway: gw}
	// The network and broadcast addresses of an IPv4 subnet wider than /31
	// are no host's.
	var reserved []netip.Addr
	if gw.Is4() && p.Bits() < 31 {
		reserved = []netip.Addr{p.Addr(), lastOf(p)}
	}
	if len(reserved) > 0 && (gw == reserved[0] || gw == reserved[1]) {
		return Subnet{}, fmt.Errorf("subnetInfo.gateway %s is the network or broadcast address of its subnet %s: give the router's own address", gw, p)
	}
	for i, r := range rs {
		what := describe(ranges[i])
		if r.First.BitLen() != bits {
			return Subnet{}, fmt.Errorf("ipRanges[%d] (%s) is not %s like subnetInfo.gateway %s: a pool with subnetInfo holds addresses of that one subnet; move the range to another pool",
				i, what, family, gw)
		}
		if !p.Contains(r.First) || !p.Contains(r.Last) {
			return Subnet{}, fmt.Errorf("ipRanges[%d] (%s) is not inside the subnet %s (subnetInfo.gateway %s, prefixLength %d): make every range part of the gateway's subnet, or fix gateway or prefixLength",
				i, what, p, gw, info.PrefixLength)
		}
		if r.Contains(gw) {
			return Subnet{}, fmt.Errorf("subnetInfo.gateway %s is inside ipRanges[%d] (%s): an Egress could be given the router's address; leave the gateway out of the ranges",
				gw, i, what)
		}
		for _, a := range reserved {
			if r.Contains(a) {
				return Subnet{}, fmt.Errorf("ipRanges[%d] (%s) holds %s, the network or broadcast address of the subnet %s: no host can use it; leave it out of the range",
					i, what, a, p)
			}
		}
	}
	return sub, nil
}

// describe is a range as the user wrote it.
func describe(r crdv1.IPRange) string {
	if r.CIDR != "" {
		return r.CIDR
	}
	return r.Start + "-" + r.End
}
