package sdk_test

import (
	"context"
	"fmt"
	"net/netip"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// guard is a complete feature: one table in the IP pipeline's Validation
// stage that drops a spoofed source, and passes everything else on.
type guard struct{}

func (guard) Describe(_ context.Context, _ sdk.DescribeRequest, r *sdk.DescribeResponse) error {
	r.Name, r.Version = "guard", "0.1.0"
	r.Tables = []sdk.Table{{Name: "guard.check", Pipeline: flow.PipelineIP, Stage: flow.StageValidation, Miss: sdk.MissNext}}
	r.Fields = []flow.Field{{Name: "guard.seen", Width: 1}}
	return nil
}

func (guard) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	b := flow.NewBatch().AddFlows(checkFlow())
	if err := req.Host.Apply(ctx, b); err != nil {
		return err
	}
	return req.Host.Synced(ctx)
}

func checkFlow() flow.Flow {
	return flow.Flow{
		Table:    "guard.check",
		Priority: 100,
		Match:    flow.Match{}.IPv4().IPv4SrcPrefix(netip.MustParsePrefix("169.254.0.0/16")),
		Actions:  []flow.Action{flow.LoadField(flow.Field{Name: "guard.seen", Width: 1}, 1)},
		// No Goto: dropped. flow.NextTable() would pass it on.
	}
}

// A plugin's main is one call; here the feature's flow is printed instead,
// in its canonical text form.
func Example() {
	var _ sdk.Feature = guard{} // func main() { sdk.Serve(guard{}) }
	f := checkFlow()
	fmt.Println(f.String())
	// Output:
	// table=guard.check, priority=100, ip,nw_src=169.254.0.0/16 actions=load:0x1->reg:guard.seen
}
