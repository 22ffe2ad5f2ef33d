// Command template is a complete, minimal Switchyard plugin: it blocks
// TCP destination ports listed in its config section. Copy this folder to
// start your own plugin; README.md walks through it.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Config is this plugin's section of the agent config (handed over as JSON).
type Config struct {
	BlockTCPPorts []uint16 `json:"blockTCPPorts"`
}

// blocker is the feature. It keeps no state beyond its config: on every
// start it installs all its flows again, and the host sweeps the rest.
type blocker struct{}

// tableBlock is our one table. Names are global on the node, so prefix them
// with the plugin name.
const tableBlock = "template.block"

func (blocker) Describe(_ context.Context, _ sdk.DescribeRequest, resp *sdk.DescribeResponse) error {
	resp.Name = "template"
	resp.Version = "0.1.0"
	resp.Tables = []sdk.Table{{
		Name:     tableBlock,
		Pipeline: flow.PipelineIP,
		Stage:    flow.StageEgressSecurity,
		Miss:     sdk.MissNext, // packets we don't block go on
	}}
	return nil
}

func (blocker) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	var cfg Config
	if len(req.Config) > 0 {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return fmt.Errorf("config: %w (want {\"blockTCPPorts\": [23, ...]})", err)
		}
	}
	b := flow.NewBatch()
	for _, port := range cfg.BlockTCPPorts {
		b.AddFlows(flow.Flow{
			Table:    tableBlock,
			Priority: 100,
			Match:    flow.Match{}.TCP4().TCPDst(port),
			// No actions and no Goto: the packet is dropped.
		})
	}
	if err := req.Host.Apply(ctx, b); err != nil {
		return fmt.Errorf("install block flows: %w", err)
	}
	req.Host.Logger().Info("blocking TCP ports", "ports", cfg.BlockTCPPorts, "table_id", req.Assignment.Tables[tableBlock])
	return req.Host.Synced(ctx)
}

func main() { sdk.Serve(blocker{}) }
