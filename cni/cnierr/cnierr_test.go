package cnierr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/google/go-cmp/cmp"
)

func TestFrom(t *testing.T) {
	base := New(IPAMExhausted, "pod CIDR 10.244.1.0/30 is exhausted", "delete unused pods")
	tests := []struct {
		name   string
		err    error
		want   *Error
		wantOK bool
	}{
		{"nil", nil, nil, false},
		{"plain", errors.New("boom"), nil, false},
		{"typed", base, base, true},
		{"wrapped typed", fmt.Errorf("podnet: %w", base), base, true},
		{"flattened", errors.New("rpc: podnet: " + base.Error()),
			&Error{Code: IPAMExhausted, Msg: "rpc: podnet: pod CIDR 10.244.1.0/30 is exhausted", Details: "delete unused pods"}, true},
		{"flattened no details", errors.New(Newf(Interface, "veth %s: exists", "eth0").Error()),
			&Error{Code: Interface, Msg: "veth eth0: exists"}, true},
		{"cni types error", types.NewError(7, "bad", "fix"), &Error{Code: 7, Msg: "bad", Details: "fix"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := From(tc.err)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("From (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzFrom: any text a plugin returns must either carry no code or yield
// one, never panic; and every *Error survives being flattened to text.
func FuzzFrom(f *testing.F) {
	f.Add(uint(101), "pod CIDR exhausted", "free some", "podnet: ")
	f.Add(uint(0), "", "", "")
	f.Add(uint(9999), "a | b", "c | d", "[cni:1] ")
	f.Fuzz(func(t *testing.T, code uint, msg, details, prefix string) {
		code %= 10000
		From(errors.New(prefix + msg + details)) // arbitrary text: must not panic
		e := New(code, msg, details)
		got, ok := From(errors.New(e.Error()))
		if !ok {
			t.Fatalf("flattened %q lost its code", e.Error())
		}
		if got.Code != code {
			t.Fatalf("code %d came back as %d from %q", code, got.Code, e.Error())
		}
	})
}
