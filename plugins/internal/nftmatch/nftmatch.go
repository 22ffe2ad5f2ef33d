package nftmatch

import (
	"net/netip"

	"github.com/google/nftables/expr"
)

// Prefix loads the source (src) or destination address of the network
// header into register 1 and compares it with p under p's mask. p's
// family picks the header layout, so the rule belongs in a table of that
// family.
func Prefix(p netip.Prefix, src bool) []expr.Any {
	var off, n uint32 = 16, 4 // IPv4 daddr
	if src {
		off = 12
	}
	if p.Addr().Is6() {
		off, n = 24, 16
		if src {
			off = 8
		}
	}
	mask := make([]byte, n)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()},
	}
}

// IfName is an interface name as nftables compares it: NUL-padded to 16.
func IfName(s string) []byte {
	b := make([]byte, 16)
	copy(b, s)
	return b
}

// LE32 is a 32-bit value as nftables holds meta mark: host byte order
// (little-endian on the machines we run on).
func LE32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
