package fromproto

import (
	"net"
	"net/netip"
)

func Addrs(ss []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range ss {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func Prefixes(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Addr maps "" (absent) to the zero Addr.
func Addr(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	return netip.ParseAddr(s)
}

// MAC maps an empty value to a nil address.
func MAC(b []byte) net.HardwareAddr {
	if len(b) == 0 {
		return nil
	}
	return net.HardwareAddr(b)
}
