package netconf

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *NetConf // only Socket, MTU, Timeout compared
		wantErr string
	}{
		{name: "defaults", in: `{"cniVersion":"1.0.0","name":"sy","type":"switchyard-cni"}`,
			want: &NetConf{Socket: DefaultSocket}},
		{name: "all set", in: `{"cniVersion":"0.3.1","name":"sy","socket":"/run/x.sock","mtu":1400,"timeoutSeconds":5}`,
			want: &NetConf{Socket: "/run/x.sock", MTU: 1400, TimeoutSeconds: 5}},
		{name: "empty", in: ``, wantErr: "stdin is empty"},
		{name: "malformed", in: `{"cniVersion":"1.0.0",`, wantErr: "not valid JSON"},
		{name: "wrong type", in: `{"cniVersion":"1.0.0","name":"sy","mtu":"big"}`, wantErr: "not valid JSON"},
		{name: "no version", in: `{"name":"sy"}`, wantErr: `"cniVersion" is missing`},
		{name: "unknown version", in: `{"cniVersion":"9.9.9","name":"sy"}`, wantErr: `cniVersion "9.9.9" is not supported`},
		{name: "no name", in: `{"cniVersion":"1.0.0"}`, wantErr: `"name" is missing`},
		{name: "relative socket", in: `{"cniVersion":"1.0.0","name":"sy","socket":"cni.sock"}`, wantErr: "must be an absolute path"},
		{name: "long socket", in: `{"cniVersion":"1.0.0","name":"sy","socket":"/` + strings.Repeat("a", 120) + `"}`, wantErr: "at most 107"},
		{name: "tiny mtu", in: `{"cniVersion":"1.0.0","name":"sy","mtu":100}`, wantErr: `"mtu" 100 is out of range`},
		{name: "negative timeout", in: `{"cniVersion":"1.0.0","name":"sy","timeoutSeconds":-1}`, wantErr: `"timeoutSeconds" -1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %q, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			type view struct {
				Socket  string
				MTU     int
				Timeout time.Duration
			}
			w := view{tc.want.Socket, tc.want.MTU, tc.want.Timeout()}
			g := view{got.Socket, got.MTU, got.Timeout()}
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParse feeds arbitrary stdin to the parser: it must never panic, and
// whatever it accepts must satisfy the invariants the rest of the binary
// relies on.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"sy","type":"switchyard-cni"}`))
	f.Add([]byte(`{"cniVersion":"0.4.0","name":"sy","socket":"/run/x.sock","mtu":1500,"prevResult":{"ips":[]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if c.Socket == "" || c.Socket[0] != '/' || len(c.Socket) > 107 {
			t.Fatalf("accepted bad socket %q", c.Socket)
		}
		if c.Timeout() <= 0 {
			t.Fatalf("accepted non-positive timeout %v", c.Timeout())
		}
		if c.MTU != 0 && (c.MTU < 576 || c.MTU > 65535) {
			t.Fatalf("accepted mtu %d", c.MTU)
		}
	})
}
