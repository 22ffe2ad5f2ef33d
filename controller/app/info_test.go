package app

import (
	"testing"

	"switchyard.dev/switchyard/controller/distribute"
)

func TestControllerInfo(t *testing.T) {
	st := controllerInfo([]distribute.NodeStream{{Node: "n2", Streams: 0, Lag: 4}, {Node: "n1", Streams: 2, Lag: 0}})
	if st.ConnectedNodes != 1 || len(st.Nodes) != 2 || st.Nodes[0].Name != "n1" || st.Nodes[1].Lag != 4 {
		t.Fatalf("status %+v: want n1 (connected) then n2 (lag 4), 1 connected", st)
	}
	for _, tc := range []struct {
		name string
		b    []distribute.NodeStream
		same bool
	}{
		{"only lags moved", []distribute.NodeStream{{Node: "n1", Streams: 2, Lag: 9}, {Node: "n2", Lag: 0}}, true},
		{"a node connected", []distribute.NodeStream{{Node: "n1", Streams: 2}, {Node: "n2", Streams: 1}}, false},
		{"a node's log expired", []distribute.NodeStream{{Node: "n1", Streams: 2}}, false},
	} {
		if got := sameNodes(st, controllerInfo(tc.b)); got != tc.same {
			t.Errorf("%s: sameNodes = %v, want %v", tc.name, got, tc.same)
		}
	}
}
