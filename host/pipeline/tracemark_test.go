package pipeline

import (
	"errors"
	"testing"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// The host keeps TracePktMark for traces: no plugin is granted it.
func TestTracePktMarkIsNeverGranted(t *testing.T) {
	a := New()
	tbl := []sdk.Table{{Name: "a.t", Pipeline: flow.PipelineIP, Stage: flow.StageRouting}}
	_, err := a.Register("a", tbl, nil, sdk.Resource{Kind: sdk.ResourcePktMark, Name: "a.all", Width: 32})
	if !errors.Is(err, sdk.ErrLimit) {
		t.Fatalf("32 pkt_mark bits: err %v, want ErrLimit (bit 31 is the host's)", err)
	}
	if _, err := a.Register("a", tbl, nil, sdk.Resource{Kind: sdk.ResourcePktMark, Name: "a.most", Width: 31}); err != nil {
		t.Fatal(err)
	}
	asg, _ := a.Assignment("a")
	if g := asg.Grants["a.most"]; g.Offset != 0 || g.Width != 31 || uint64(TracePktMark)&g.Mask128().Lo != 0 {
		t.Errorf("a.most granted %+v, overlapping the trace mark", g)
	}
}
