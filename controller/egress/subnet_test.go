package egress

import (
	"net/netip"
	"strings"
	"testing"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
)

func TestParseSubnet(t *testing.T) {
	cidr := func(c string) []crdv1.IPRange { return []crdv1.IPRange{{CIDR: c}} }
	info := func(gw string, l int32) *crdv1.SubnetInfo { return &crdv1.SubnetInfo{Gateway: gw, PrefixLength: l} }
	for _, tc := range []struct {
		name    string
		info    *crdv1.SubnetInfo
		ranges  []crdv1.IPRange
		want    Subnet
		wantErr string
	}{
		{name: "no subnetInfo", ranges: cidr("198.18.1.64/28")},
		{name: "cidr inside", info: info("198.18.1.1", 24), ranges: cidr("198.18.1.64/28"),
			want: Subnet{Prefix: netip.MustParsePrefix("198.18.1.0/24"), Gateway: netip.MustParseAddr("198.18.1.1")}},
		{name: "start-end inside, gateway above", info: info("198.18.1.254", 24),
			ranges: []crdv1.IPRange{{Start: "198.18.1.10", End: "198.18.1.20"}, {CIDR: "198.18.1.128/26"}},
			want:   Subnet{Prefix: netip.MustParsePrefix("198.18.1.0/24"), Gateway: netip.MustParseAddr("198.18.1.254")}},
		{name: "ipv6 is refused by name, not routed by the main table in silence", info: info("fd00:18:1::1", 64), ranges: cidr("fd00:18:1::100/120"),
			wantErr: "subnetInfo.gateway fd00:18:1::1 is IPv6; subnetInfo is supported for IPv4 pools only so far"},
		{name: "a cidr range leaves out its network and broadcast addresses", info: info("198.18.1.1", 23), ranges: cidr("198.18.0.0/24"),
			want: Subnet{Prefix: netip.MustParsePrefix("198.18.0.0/23"), Gateway: netip.MustParseAddr("198.18.1.1")}},
		{name: "gateway not an address", info: info("router", 24), ranges: cidr("198.18.1.64/28"),
			wantErr: `subnetInfo.gateway "router" is not an IP address`},
		{name: "gateway empty", info: info("", 24), ranges: cidr("198.18.1.64/28"),
			wantErr: `subnetInfo.gateway "" is not an IP address`},
		{name: "prefix too long for ipv4", info: info("198.18.1.1", 33), ranges: cidr("198.18.1.64/28"),
			wantErr: "subnetInfo.prefixLength 33 does not fit the IPv4 gateway 198.18.1.1: give 1 to 32"},
		{name: "prefix zero", info: info("198.18.1.1", 0), ranges: cidr("198.18.1.64/28"),
			wantErr: "subnetInfo.prefixLength 0 does not fit the IPv4 gateway 198.18.1.1"},
		{name: "range outside the subnet", info: info("198.18.2.1", 24), ranges: cidr("198.18.1.64/28"),
			wantErr: "ipRanges[0] (198.18.1.64/28) is not inside the subnet 198.18.2.0/24 (subnetInfo.gateway 198.18.2.1, prefixLength 24)"},
		{name: "range straddles the subnet's end", info: info("198.18.1.1", 24),
			ranges:  []crdv1.IPRange{{CIDR: "198.18.1.64/28"}, {Start: "198.18.1.250", End: "198.18.2.5"}},
			wantErr: "ipRanges[1] (198.18.1.250-198.18.2.5) is not inside the subnet 198.18.1.0/24"},
		{name: "gateway inside a range", info: info("198.18.1.70", 24), ranges: cidr("198.18.1.64/28"),
			wantErr: "subnetInfo.gateway 198.18.1.70 is inside ipRanges[0] (198.18.1.64/28)"},
		{name: "gateway is the network address", info: info("198.18.1.0", 24), ranges: cidr("198.18.1.64/28"),
			wantErr: "subnetInfo.gateway 198.18.1.0 is the network or broadcast address of its subnet 198.18.1.0/24"},
		{name: "range holds the broadcast address", info: info("198.18.1.1", 24), ranges: []crdv1.IPRange{{Start: "198.18.1.250", End: "198.18.1.255"}},
			wantErr: "ipRanges[0] (198.18.1.250-198.18.1.255) holds 198.18.1.255, the network or broadcast address of the subnet 198.18.1.0/24"},
		{name: "family mismatch", info: info("198.18.1.1", 24), ranges: []crdv1.IPRange{{CIDR: "198.18.1.64/28"}, {CIDR: "fd00::/120"}},
			wantErr: "ipRanges[1] (fd00::/120) is not IPv4 like subnetInfo.gateway 198.18.1.1"},
		{name: "bad ranges are ParseRanges' errors", info: info("198.18.1.1", 24), ranges: nil,
			wantErr: "ipRanges is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSubnet(tc.info, tc.ranges)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
