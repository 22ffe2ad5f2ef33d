// Command alpha is a test plugin: it attaches the configured veths to the
// bridge and forwards between them — root classifier, ARP output by target
// IP, L2 switching by destination MAC into sdk.target_ofport, and output by
// that register.
package main

import (
	"context"
	"fmt"

	"switchyard.dev/switchyard/plugins/testplugins/internal/tpconf"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

type alpha struct{}

const (
	tClass = "alpha.classifier"
	tARP   = "alpha.arp"
	tL2    = "alpha.l2"
	tOut   = "alpha.output"
)

func (alpha) Describe(_ context.Context, _ sdk.DescribeRequest, r *sdk.DescribeResponse) error {
	r.Name, r.Version = "alpha", "1.0.0"
	r.Tables = []sdk.Table{
		{Name: tClass, Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier},
		{Name: tARP, Pipeline: flow.PipelineARP, Stage: flow.StageOutput},
		{Name: tL2, Pipeline: flow.PipelineIP, Stage: flow.StageSwitching},
		{Name: tOut, Pipeline: flow.PipelineIP, Stage: flow.StageOutput},
	}
	return nil
}

func (alpha) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	cfg, err := tpconf.Parse(req.Config)
	if err != nil {
		return err
	}
	h := req.Host
	b := flow.NewBatch()
	for _, p := range cfg.Ports {
		port, err := h.CreatePort(ctx, sdk.PortRequest{Name: p.Name, OFPort: p.OFPort, ExternalIDs: map[string]string{"test-ip": p.IP}})
		if err != nil {
			return fmt.Errorf("attach %s: %w", p.Name, err)
		}
		in := flow.Match{}.InPort(port.OFPort)
		b.AddFlows(
			flow.Flow{Table: tClass, Priority: 100, Match: in.IPv4(),
				Actions: []flow.Action{flow.LoadField(flow.FieldPacketSource, flow.PacketSourceLocal)},
				Goto:    flow.GotoPipeline(flow.PipelineIP, flow.StageValidation)},
			flow.Flow{Table: tClass, Priority: 100, Match: in.ARP(),
				Actions: []flow.Action{flow.LoadField(flow.FieldPacketSource, flow.PacketSourceLocal)},
				Goto:    flow.GotoPipeline(flow.PipelineARP, flow.StageValidation)},
			flow.Flow{Table: tARP, Priority: 100, Match: flow.Match{}.ARP().ARPTpa(p.Addr()),
				Actions: []flow.Action{flow.Output(port.OFPort)}},
			flow.Flow{Table: tL2, Priority: 100, Match: flow.Match{}.EthDst(p.HW()),
				Actions: []flow.Action{flow.LoadField(flow.FieldTargetPort, port.OFPort), flow.LoadField(flow.FieldOutputReady, 1)},
				Goto:    flow.NextTable()},
		)
	}
	b.AddFlows(flow.Flow{Table: tOut, Priority: 100, Match: flow.Match{}.Field(flow.FieldOutputReady, 1),
		Actions: []flow.Action{flow.OutputField(flow.FieldTargetPort)}})
	if err := h.Apply(ctx, b); err != nil {
		return err
	}
	h.Logger().Info("alpha wired ports", "ports", len(cfg.Ports), "flows", b.Len())
	return h.Synced(ctx)
}

func main() { sdk.Serve(alpha{}) }
