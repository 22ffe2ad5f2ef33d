package flows

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

var local = Local{GatewayMAC: net.HardwareAddr{0x0a, 0x58, 0x0a, 0xf4, 0x01, 0x01},
	Mark: sdk.Grant{Kind: sdk.ResourcePktMark, Offset: 8, Width: 8}}

func strs(fs []flow.Flow) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
		if err := f.Validate(); err != nil {
			out = append(out, "INVALID: "+err.Error())
		}
	}
	return out
}

func TestPodFlows(t *testing.T) {
	ip := netip.MustParseAddr
	for _, tc := range []struct {
		name string
		pod  Pod
		want []string
	}{
		{"local pod, IP held elsewhere: into the tunnel", Pod{Key: "ns/a", IP: ip("10.244.1.5"), Local: true, Holder: ip("198.18.0.3")},
			[]string{"table=egress.mark, priority=200, ip,reg:sdk.pkt_source=0x1,nw_src=10.244.1.5 actions=set_field:0a:58:0a:f4:01:01->eth_src,set_field:0a:58:ff:ff:ff:fe->eth_dst,set_field:198.18.0.3->tun_dst,dec_ttl,goto_table:@next"}},
		{"local pod, IP held here: marked", Pod{Key: "ns/a", IP: ip("10.244.1.5"), Local: true, MarkID: 3},
			[]string{"table=egress.mark, priority=200, ip,reg:sdk.pkt_source=0x1,nw_src=10.244.1.5 actions=set_field:0x300/0xff00->pkt_mark,goto_table:@next"}},
		{"remote pod, IP held here: marked as it leaves the tunnel", Pod{Key: "ns/b", IP: ip("10.244.2.5"), MarkID: 1},
			[]string{"table=egress.mark, priority=200, ip,reg:sdk.pkt_source=0x3,nw_src=10.244.2.5 actions=set_field:0x100/0xff00->pkt_mark,goto_table:@next"}},
		{"remote pod, IP held here, with bandwidth: metered", Pod{Key: "ns/b", IP: ip("10.244.2.5"), MarkID: 1, Meter: 1},
			[]string{"table=egress.mark, priority=200, ip,reg:sdk.pkt_source=0x3,nw_src=10.244.2.5 actions=meter:1,set_field:0x100/0xff00->pkt_mark,goto_table:@next"}},
		{"remote pod, IP held elsewhere: nothing", Pod{Key: "ns/b", IP: ip("10.244.2.5"), Holder: ip("198.18.0.3")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := PodFlows(local, tc.pod)
			if d := cmp.Diff(tc.want, strs(fs)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			for _, f := range fs {
				if f.Tag != Tag(tc.pod.Key) {
					t.Errorf("tag %#x, want %#x", f.Tag, Tag(tc.pod.Key))
				}
			}
		})
	}
}

func TestKeepFlows(t *testing.T) {
	want := []string{
		"table=egress.mark, priority=300, ip,nw_dst=10.244.0.0/16 actions=goto_table:@next",
		"table=egress.mark, priority=300, ipv6,ipv6_dst=fd00::/64 actions=goto_table:@next",
	}
	got := strs(KeepFlows([]netip.Prefix{netip.MustParsePrefix("10.244.0.1/16"), netip.MustParsePrefix("fd00::/64")}))
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestParseBits(t *testing.T) {
	for in, want := range map[string]uint32{"10M": 10000, "500k": 500, "1G": 1000000, "1500": 1, "2000": 2} {
		if got, err := ParseBits(in); err != nil || got != want {
			t.Errorf("ParseBits(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ten", "-1M", "0", "10T"} {
		if _, err := ParseBits(in); err == nil {
			t.Errorf("ParseBits(%q) took it", in)
		}
	}
}

// FuzzParseBits: bandwidths come from users; parsing never panics and
// what it accepts is at least 1 kbit.
func FuzzParseBits(f *testing.F) {
	for _, s := range []string{"10M", "1k", "1G", "0", "", "18446744073709551615G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if k, err := ParseBits(s); err == nil && k == 0 {
			t.Fatalf("ParseBits(%q) = 0 without an error", s)
		}
	})
}
