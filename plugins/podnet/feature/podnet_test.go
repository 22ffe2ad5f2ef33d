package feature

import (
	"net/netip"
	"strings"
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

// A DEL looks for the pod's flows under every number its port had: the
// one the ADD installed them under (the requested) and the one the switch
// gave, when the attach failed or the switch numbered the port otherwise.
func TestAttachmentTags(t *testing.T) {
	tests := []struct {
		name              string
		ofport, requested uint32
		want              []uint32
	}{
		{"attached as requested", 7, 7, []uint32{7}},
		{"renumbered by the switch", 8, 7, []uint32{8, 7}},
		{"attach failed", 0, 7, []uint32{7}},
		{"created without a number, attached", 5, 0, []uint32{5}},
		{"no port", 0, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := attachment{ofport: tc.ofport, requested: tc.requested}.tags()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tags (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    Config
		wantErr string
	}{
		{"empty takes the defaults", "", Config{StateDir: DefaultStateDir, Gateway: DefaultGateway}, ""},
		{"null takes the defaults", "null", Config{StateDir: DefaultStateDir, Gateway: DefaultGateway}, ""},
		{"warm ports", `{"warmPorts": 4, "stateDir": "/s"}`, Config{StateDir: "/s", Gateway: DefaultGateway, WarmPorts: 4}, ""},
		{"negative warm ports", `{"warmPorts": -1}`, Config{}, "warmPorts: -1 is out of range; set 0 (no warm ports) to 64"},
		{"too many warm ports", `{"warmPorts": 65}`, Config{}, "warmPorts: 65 is out of range"},
		{"not JSON", `{warmPorts`, Config{}, "podnet config:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tc.raw))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseConfig(%s) error = %v, want one containing %q", tc.raw, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseConfig(%s) (-want +got):\n%s", tc.raw, diff)
			}
		})
	}
}
