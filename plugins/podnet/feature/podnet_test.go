package feature

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHostIfName(t *testing.T) {
	a := HostIfName("c0ffee", "eth0")
	if len(a) > 15 || a[:2] != "sy" {
		t.Errorf("HostIfName = %q: must start with sy and fit IFNAMSIZ", a)
	}
	if a != HostIfName("c0ffee", "eth0") {
		t.Error("HostIfName is not deterministic; DEL without a record could not find the interface")
	}
	if a == HostIfName("c0ffee", "net1") || a == HostIfName("c0ffef", "eth0") {
		t.Error("HostIfName collides for different attachments")
	}
}

func TestStableMAC(t *testing.T) {
	tests := []struct {
		name string
		ips  []string
		want string
	}{
		{"v4", []string{"10.244.1.5"}, "0a:58:0a:f4:01:05"},
		{"dual, v4 wins", []string{"fd00::5", "10.244.1.5"}, "0a:58:0a:f4:01:05"},
		{"v6 only is hashed", []string{"fd00::5"}, stableMAC([]netip.Addr{netip.MustParseAddr("fd00::5")}).String()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ips []netip.Addr
			for _, s := range tc.ips {
				ips = append(ips, netip.MustParseAddr(s))
			}
			got := stableMAC(ips)
			if diff := cmp.Diff(tc.want, got.String()); diff != "" {
				t.Errorf("stableMAC (-want +got):\n%s", diff)
			}
			if got[0]&0x01 != 0 || got[0]&0x02 == 0 {
				t.Errorf("%s is not a locally administered unicast MAC", got)
			}
		})
	}
}
