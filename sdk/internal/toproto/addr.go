package toproto

import "net/netip"

// Addrs, Prefixes and Addr carry addresses in their text form, which both
// sides parse strictly (see fromproto).
func Addrs(as []netip.Addr) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

func Prefixes(ps []netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// Addr maps the zero Addr to "" (absent).
func Addr(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
