// Command warden is a test plugin standing in for a policy plugin in the
// operability tests (itest/ops): it declares one table in
// ip/IngressSecurity that drops TCP to one port (config denyPort, default
// 9), reports metrics of its own (sdk.MetricsReporter) and says what its
// flows mean (sdk.FlowDescriber), so a trace of a dropped packet names a
// policy and a rule the way netpol will.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

const (
	tIngress = "warden.ingress"
	// tagDeny is the cookie tag of the drop flow: what a policy plugin
	// would use for a rule ID.
	tagDeny uint32 = 0x77
)

type warden struct {
	port      atomic.Uint32
	described atomic.Uint64
	scrapes   atomic.Uint64
}

var (
	_ sdk.MetricsReporter = (*warden)(nil)
	_ sdk.FlowDescriber   = (*warden)(nil)
)

func (*warden) Describe(_ context.Context, _ sdk.DescribeRequest, r *sdk.DescribeResponse) error {
	r.Name, r.Version = "warden", "0.1.0"
	r.Tables = []sdk.Table{{Name: tIngress, Pipeline: flow.PipelineIP, Stage: flow.StageIngressSecurity, Miss: sdk.MissNext}}
	return nil
}

func (w *warden) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	cfg := struct {
		DenyPort uint16 `json:"denyPort"`
	}{DenyPort: 9}
	if len(req.Config) > 0 {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return fmt.Errorf("warden config: %w", err)
		}
	}
	w.port.Store(uint32(cfg.DenyPort))
	b := flow.NewBatch().AddFlows(flow.Flow{Table: tIngress, Priority: 100, Match: flow.Match{}.TCP4().TCPDst(cfg.DenyPort), Tag: tagDeny})
	if err := req.Host.Apply(ctx, b); err != nil {
		return err
	}
	return req.Host.Synced(ctx)
}

func (w *warden) Metrics(_ context.Context, _ sdk.MetricsRequest, r *sdk.MetricsResponse) error {
	n := w.scrapes.Add(1)
	r.Metrics = []sdk.Metric{
		{Name: "warden_rules", Help: "Rules warden enforces.", Kind: sdk.MetricGauge, Labels: map[string]string{"action": "drop"}, Value: 1},
		{Name: "warden_scrapes_total", Help: "Times the host asked warden for its metrics.", Kind: sdk.MetricCounter, Value: float64(n)},
		{Name: "warden_flow_descriptions_total", Help: "Flows warden described for traces.", Kind: sdk.MetricCounter, Value: float64(w.described.Load())},
	}
	return nil
}

func (w *warden) DescribeFlow(_ context.Context, req sdk.DescribeFlowRequest, r *sdk.DescribeFlowResponse) error {
	w.described.Add(1)
	if req.Tag == tagDeny {
		r.Description = fmt.Sprintf(`policy "itest/deny-%d" ingress rule 0: drop tcp/%d`, w.port.Load(), w.port.Load())
	}
	return nil
}

func main() { sdk.Serve(&warden{}) }
