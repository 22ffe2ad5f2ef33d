package nftmatch

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables/expr"
)

// Prefix loads the right header bytes and masks them to the prefix.
func TestPrefix(t *testing.T) {
	for _, tc := range []struct {
		prefix       string
		src          bool
		offset, size uint32
		mask, value  []byte
	}{
		{"10.244.1.0/24", true, 12, 4, []byte{255, 255, 255, 0}, []byte{10, 244, 1, 0}},
		{"198.18.0.2/32", false, 16, 4, []byte{255, 255, 255, 255}, []byte{198, 18, 0, 2}},
		{"10.244.0.0/17", false, 16, 4, []byte{255, 255, 128, 0}, []byte{10, 244, 0, 0}},
		{"fd00:10:244:1::/64", true, 8, 16, []byte{255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0},
			netip.MustParseAddr("fd00:10:244:1::").AsSlice()},
		{"fd00::/8", false, 24, 16, []byte{255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, netip.MustParseAddr("fd00::").AsSlice()},
	} {
		es := Prefix(netip.MustParsePrefix(tc.prefix), tc.src)
		p, b, c := es[0].(*expr.Payload), es[1].(*expr.Bitwise), es[2].(*expr.Cmp)
		if p.Offset != tc.offset || p.Len != tc.size || p.Base != expr.PayloadBaseNetworkHeader {
			t.Errorf("%s src=%v: loads %d bytes at %d, want %d at %d", tc.prefix, tc.src, p.Len, p.Offset, tc.size, tc.offset)
		}
		if d := cmp.Diff(tc.mask, b.Mask); d != "" {
			t.Errorf("%s: mask (-want +got):\n%s", tc.prefix, d)
		}
		if d := cmp.Diff(tc.value, c.Data); d != "" {
			t.Errorf("%s: value (-want +got):\n%s", tc.prefix, d)
		}
	}
}

func TestIfNameAndLE32(t *testing.T) {
	if got := IfName("sy-gw0"); len(got) != 16 || string(got[:6]) != "sy-gw0" || got[6] != 0 {
		t.Errorf("IfName = %q, want sy-gw0 NUL-padded to 16 bytes", got)
	}
	if got := LE32(0x01020304); string(got) != "\x04\x03\x02\x01" {
		t.Errorf("LE32 = %x, want host (little-endian) order", got)
	}
}
