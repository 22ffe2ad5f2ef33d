// Command alpha is a test plugin: it attaches the configured veths to the
// bridge and forwards between them — root classifier, ARP output by target
// IP, L2 switching by destination MAC into sdk.target_ofport, and output by
// that register.
package main

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"switchyard.dev/switchyard/plugins/testplugins/internal/tpconf"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// alpha keeps what its packet-in handler needs from Start.
type alpha struct {
	mu    sync.Mutex
	host  sdk.Host
	ports []tpconf.Port
}

const (
	tClass = "alpha.classifier"
	tARP   = "alpha.arp"
	tL2    = "alpha.l2"
	tOut   = "alpha.output"
)

func (*alpha) Describe(_ context.Context, _ sdk.DescribeRequest, r *sdk.DescribeResponse) error {
	r.Name, r.Version = "alpha", "1.0.0"
	r.Tables = []sdk.Table{
		{Name: tClass, Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier},
		{Name: tARP, Pipeline: flow.PipelineARP, Stage: flow.StageOutput},
		{Name: tL2, Pipeline: flow.PipelineIP, Stage: flow.StageSwitching},
		{Name: tOut, Pipeline: flow.PipelineIP, Stage: flow.StageOutput},
	}
	return nil
}

func (a *alpha) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
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
	if cfg.Punt != "" {
		punt, err := netip.ParseAddr(cfg.Punt)
		if err != nil {
			return fmt.Errorf("punt: %w", err)
		}
		b.AddFlows(flow.Flow{Table: tClass, Priority: 200, Match: flow.Match{}.ICMP4().IPv4Dst(punt), Tag: 7,
			Actions: []flow.Action{flow.Controller(0xffff, []byte("alpha-punt"))}})
	}
	a.mu.Lock()
	a.host, a.ports = h, cfg.Ports
	a.mu.Unlock()
	b.AddFlows(flow.Flow{Table: tOut, Priority: 100, Match: flow.Match{}.Field(flow.FieldOutputReady, 1),
		Actions: []flow.Action{flow.OutputField(flow.FieldTargetPort)}})
	if err := h.Apply(ctx, b); err != nil {
		return err
	}
	h.Logger().Info("alpha wired ports", "ports", len(cfg.Ports), "flows", b.Len())
	return h.Synced(ctx)
}

// PacketIn re-injects a punted packet towards the other port, rewritten to
// that pod's MAC and IP (OVS fixes the checksums).
func (a *alpha) PacketIn(ctx context.Context, req sdk.PacketInRequest, _ *sdk.PacketInResponse) error {
	a.mu.Lock()
	h, ports := a.host, a.ports
	a.mu.Unlock()
	h.Logger().Info("alpha packet-in", "table", req.Table, "table_id", req.TableID, "tag", req.Tag, "in_port", req.InPort,
		"userdata", string(req.Userdata), "bytes", len(req.Data))
	for _, p := range ports {
		if p.OFPort == req.InPort {
			continue
		}
		return h.PacketOut(ctx, sdk.PacketOut{InPort: req.InPort, Data: req.Data, Actions: []flow.Action{
			flow.SetEthDst(p.HW()), flow.SetIPv4Dst(p.Addr()), flow.Output(p.OFPort)}})
	}
	return nil
}

func main() { sdk.Serve(&alpha{}) }
