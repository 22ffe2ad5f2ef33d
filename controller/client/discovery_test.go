package client

import "testing"

func TestParseServiceAddress(t *testing.T) {
	tests := []struct {
		addr string
		want ServiceAddress
		ok   bool
	}{
		{"switchyard-controller.kube-system.svc:10349", ServiceAddress{"switchyard-controller", "kube-system", 10349}, true},
		{"switchyard-controller.kube-system.svc.cluster.local:10349", ServiceAddress{"switchyard-controller", "kube-system", 10349}, true},
		{"switchyard-controller.kube-system.svc.cluster.local.:443", ServiceAddress{"switchyard-controller", "kube-system", 443}, true},
		{"10.0.0.5:10349", ServiceAddress{}, false},
		{"controller.example.com:10349", ServiceAddress{}, false},
		{"switchyard-controller:10349", ServiceAddress{}, false},
		{"switchyard-controller.kube-system.svc", ServiceAddress{}, false},
		{"switchyard-controller.kube-system.svc:0", ServiceAddress{}, false},
		{".kube-system.svc:1", ServiceAddress{}, false},
	}
	for _, tc := range tests {
		got, ok := ParseServiceAddress(tc.addr)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseServiceAddress(%q) = %+v, %v; want %+v, %v", tc.addr, got, ok, tc.want, tc.ok)
		}
	}
	if n := (ServiceAddress{"a", "b", 1}).ServerName(); n != "a.b.svc" {
		t.Errorf("ServerName = %q", n)
	}
}
