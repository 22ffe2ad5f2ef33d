package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/host/openflow"
)

func TestMarkedMatch(t *testing.T) {
	mark := uint64(1) << 31
	for _, tc := range []struct {
		name string
		in   openflow.Match
		want openflow.Match
		ok   bool
	}{
		{"adds the mark", openflow.Match{openflow.Exact(openflow.FieldInPort, 3)},
			openflow.Match{openflow.Exact(openflow.FieldInPort, 3), openflow.Masked(openflow.FieldPktMark, mark, mark)}, true},
		{"merges with a plugin's pkt_mark bits", openflow.Match{openflow.Masked(openflow.FieldPktMark, 0x1, 0x3)},
			openflow.Match{openflow.Masked(openflow.FieldPktMark, 0x1|mark, 0x3|mark)}, true},
		{"a miss (empty match)", nil, openflow.Match{openflow.Masked(openflow.FieldPktMark, mark, mark)}, true},
		{"refuses a match on the mark itself", openflow.Match{openflow.Masked(openflow.FieldPktMark, mark, mark)}, nil, false},
	} {
		got, ok := markedMatch(tc.in, mark)
		if ok != tc.ok || !cmp.Equal(got, tc.want) {
			t.Errorf("%s: markedMatch = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
