package underlay

import (
	"net/netip"
	"strings"
	"testing"
)

func TestPickUplink(t *testing.T) {
	ip := netip.MustParseAddr
	nodeIP := ip("198.18.0.1")
	lo := Link{Name: "lo", Addrs: []netip.Addr{ip("127.0.0.1")}}
	gw := Link{Name: "sy-gw0", MAC: "0a:58:0a:f4:01:01", Addrs: []netip.Addr{ip("10.244.1.1")}}
	for _, c := range []struct {
		name    string
		links   []Link
		want    string
		wantErr string
	}{
		{"first start: the interface with the node IP", []Link{lo, {Name: "eth0", MAC: "02:00:00:00:00:01", Addrs: []netip.Addr{nodeIP}}, gw}, "eth0", ""},
		{"after a move: the bridge holds it, the uplink has its MAC", []Link{lo,
			{Name: "eth0", MAC: "02:00:00:00:00:01"},
			{Name: "br-phy", MAC: "02:00:00:00:00:01", Addrs: []netip.Addr{nodeIP}}, gw}, "eth0", ""},
		{"no interface holds it", []Link{lo, gw}, "", "no interface holds the node IP 198.18.0.1"},
		{"after a move, two interfaces with the bridge's MAC", []Link{
			{Name: "eth0", MAC: "02:00:00:00:00:01"}, {Name: "eth1", MAC: "02:00:00:00:00:01"},
			{Name: "br-phy", MAC: "02:00:00:00:00:01", Addrs: []netip.Addr{nodeIP}}}, "", "2 interfaces carry its MAC"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := pickUplink("br-phy", nodeIP, c.links)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
