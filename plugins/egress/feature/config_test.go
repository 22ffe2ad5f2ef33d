package feature

import (
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		in, wantErr string
	}{
		{"", ""},
		{`{"exceptCIDRs":["192.0.2.0/24"],"serviceCIDRs":["10.96.0.0/12"]}`, ""},
		{`{"exceptCIDRs":["192.0.2.0"]}`, "egress config"},
		{`{"memberlistPort":70000}`, "memberlistPort: 70000 is not a port"},
		{`{"device":"a-very-long-device-name"}`, "longer than 15"},
		{`{"routeTableBase":2000}`, ""},
		{`{"routeTableBase":200}`, "routeTableBase: 200 is out of range: give 256 to"},
		{`{"routeTableBase":-5}`, "routeTableBase: -5 is out of range"},
	} {
		c, err := ParseConfig([]byte(tc.in))
		if tc.wantErr == "" {
			if err != nil || c.Device != DefaultDevice && tc.in == "" {
				t.Errorf("%q: %v %+v", tc.in, err, c)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.wantErr)
		}
	}
}
