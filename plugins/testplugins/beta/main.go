// Command beta is a test plugin: an IP spoof guard (ip/Validation) and an
// ingress table (ip/IngressSecurity). With foreignTable set it tries to
// write into another plugin's private table and logs the refusal; with
// probe set it installs one flow unique to this incarnation, so a test can
// watch the previous incarnation's copy get swept. With flows set it
// installs that many filler flows (benchmarks); with churn set it rewrites
// that many flows, batch after batch (the isolation benchmark).
package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"switchyard.dev/switchyard/plugins/testplugins/internal/tpconf"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

type beta struct {
	started  atomic.Bool
	eventLog atomic.Pointer[string]
}

const (
	tGuard   = "beta.guard"
	tIngress = "beta.ingress"
)

func (*beta) Describe(_ context.Context, _ sdk.DescribeRequest, r *sdk.DescribeResponse) error {
	r.Name, r.Version = "beta", "1.0.0"
	r.Tables = []sdk.Table{
		{Name: tGuard, Pipeline: flow.PipelineIP, Stage: flow.StageValidation, Miss: sdk.MissNext},
		{Name: tIngress, Pipeline: flow.PipelineIP, Stage: flow.StageIngressSecurity, Miss: sdk.MissNext},
	}
	return nil
}

// FillerFlow is the i-th benchmark flow: a /32 destination in 10.128.0.0/9.
func FillerFlow(i int) flow.Flow {
	a := netip.AddrFrom4([4]byte{10, byte(128 + i>>16&0x7f), byte(i >> 8), byte(i)})
	return flow.Flow{Table: tIngress, Priority: 10, Match: flow.Match{}.IPv4().IPv4Dst(a), Actions: []flow.Action{flow.Output(uint32(1 + i%8))}}
}

func (bt *beta) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) (err error) {
	defer func() { bt.started.Store(err == nil) }()
	cfg, err := tpconf.Parse(req.Config)
	if err != nil {
		return err
	}
	bt.eventLog.Store(&cfg.EventLog)
	if cfg.StartBlock != "" {
		if err := os.WriteFile(cfg.StartBlock+".entered", nil, 0o644); err != nil {
			return err
		}
		for _, err := os.Stat(cfg.StartBlock); err == nil; _, err = os.Stat(cfg.StartBlock) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	h := req.Host
	if cfg.Churn > 0 {
		if err := h.Synced(ctx); err != nil {
			return err
		}
		go churn(h, cfg.Churn, cfg.ChurnFile)
		return nil
	}
	b := flow.NewBatch()
	for _, p := range cfg.Ports {
		port, err := h.Port(ctx, p.Name)
		for i := 0; errors.Is(err, sdk.ErrNotFound) && i < 100; i++ { // alpha attaches the ports
			time.Sleep(50 * time.Millisecond)
			port, err = h.Port(ctx, p.Name)
		}
		if err != nil {
			return fmt.Errorf("port %s: %w", p.Name, err)
		}
		b.AddFlows(flow.Flow{Table: tGuard, Priority: 100, Match: flow.Match{}.InPort(port.OFPort).IPv4().IPv4Src(p.Addr()), Goto: flow.NextTable()})
	}
	// Anything else claiming a pod source is spoofed.
	b.AddFlows(flow.Flow{Table: tGuard, Priority: 90, Match: flow.Match{}.IPv4().Field(flow.FieldPacketSource, flow.PacketSourceLocal)})
	if cfg.Probe {
		port := uint16(10000 + os.Getpid()%50000)
		b.AddFlows(flow.Flow{Table: tIngress, Priority: 200, Match: flow.Match{}.TCP4().TCPDst(port), Tag: 0xbeef})
	}
	if err := h.Apply(ctx, b); err != nil {
		return err
	}
	if cfg.ForeignTable != "" {
		err := h.Apply(ctx, flow.NewBatch().AddFlows(flow.Flow{Table: cfg.ForeignTable, Priority: 1}))
		switch {
		case errors.Is(err, sdk.ErrNotOwner):
			h.Logger().Info("foreign table write refused as expected", "table", cfg.ForeignTable, "error", err)
		default:
			h.Logger().Error("foreign table write was NOT refused", "table", cfg.ForeignTable, "error", err)
		}
	}
	if cfg.ForeignPort != "" {
		port, err := h.Port(ctx, cfg.ForeignPort)
		if err == nil {
			err = h.Apply(ctx, flow.NewBatch().AddFlows(flow.Flow{Table: tIngress, Priority: 2, Actions: []flow.Action{flow.Output(port.OFPort)}}))
		}
		switch {
		case errors.Is(err, sdk.ErrNotOwner):
			h.Logger().Info("foreign port output refused as expected", "port", cfg.ForeignPort, "owner", port.Owner, "error", err)
		default:
			h.Logger().Error("foreign port output was NOT refused", "port", cfg.ForeignPort, "error", err)
		}
	}
	if cfg.Flows > 0 {
		if err := fill(ctx, h, cfg.Flows, cfg.Batch); err != nil {
			return err
		}
	}
	return h.Synced(ctx)
}

// fill installs n filler flows in batches, building the next batch while
// the host applies the current one (the way a plugin with many flows should
// submit them: its CPU work then overlaps the host's and the switch's).
func fill(ctx context.Context, h sdk.Host, n, batch int) error {
	if batch <= 0 {
		batch = 5000
	}
	start := time.Now()
	batches := make(chan *flow.Batch, 1)
	go func() {
		defer close(batches)
		for i := 0; i < n; i += batch {
			b := flow.NewBatch()
			for j := i; j < min(n, i+batch); j++ {
				b.AddFlows(FillerFlow(j))
			}
			select {
			case batches <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	i := 0
	for b := range batches {
		if err := h.Apply(ctx, b); err != nil {
			for range batches { // let the builder finish
			}
			return fmt.Errorf("filler batch %d: %w", i, err)
		}
		i++
	}
	h.Logger().Info("filler flows installed", "flows", n, "took", time.Since(start))
	return nil
}

// PodInterfaceEvent logs the event, and whether Start had returned when it
// came, to the configured event log.
func (bt *beta) PodInterfaceEvent(_ context.Context, req sdk.PodInterfaceEventRequest, _ *sdk.PodInterfaceEventResponse) error {
	path := bt.eventLog.Load()
	if path == nil || *path == "" {
		return nil
	}
	phase := "during-start"
	if bt.started.Load() {
		phase = "after-start"
	}
	f, err := os.OpenFile(*path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%d %s %d %s\n", os.Getpid(), phase, req.Kind, req.Interface.ContainerID)
	return err
}

// bare is beta run with -name NAME: a plugin with no tables. With -cni it
// claims the CNI capability (a node takes one CNI plugin; tests load two);
// with -describe-error its Describe fails.
type bare struct {
	name          string
	describeError bool
}

func (c bare) Describe(_ context.Context, _ sdk.DescribeRequest, r *sdk.DescribeResponse) error {
	if c.describeError {
		return fmt.Errorf("%w: plugin %s was told to refuse to describe itself", sdk.ErrInvalid, c.name)
	}
	r.Name, r.Version = c.name, "1.0.0"
	return nil
}

func (bare) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	return req.Host.Synced(ctx)
}

type cniOnly struct{ bare }

func (cniOnly) CNIAdd(context.Context, sdk.CNIAddRequest, *sdk.CNIAddResponse) error {
	return errors.New("cniOnly wires no pods")
}
func (cniOnly) CNIDel(context.Context, sdk.CNIDelRequest, *sdk.CNIDelResponse) error { return nil }
func (cniOnly) CNICheck(context.Context, sdk.CNICheckRequest, *sdk.CNICheckResponse) error {
	return nil
}

// churn re-applies n flows in one batch, back to back, while file exists;
// each batch moves every flow to another output port, so each one really
// rewrites n flows on the switch. It runs until the process ends.
func churn(h sdk.Host, n int, file string) {
	ctx := context.Background()
	batches, idle := 0, false
	for gen := 0; ; gen++ {
		if _, err := os.Stat(file); err != nil {
			if !idle {
				_ = os.WriteFile(file+".idle", nil, 0o644)
				idle = true
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		idle = false
		b := flow.NewBatch()
		for i := range n {
			f := FillerFlow(i)
			f.Actions = []flow.Action{flow.Output(uint32(1 + (i+gen)%8))}
			b.AddFlows(f)
		}
		if err := h.Apply(ctx, b); err != nil {
			h.Logger().Error("churn batch refused", "error", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		batches++
		// Renamed into place: a reader never sees the file empty, half
		// written, which read as 0 batches and spoiled the count.
		if os.WriteFile(file+".n.tmp", []byte(fmt.Sprint(batches)), 0o644) == nil {
			_ = os.Rename(file+".n.tmp", file+".n")
		}
	}
}

func main() {
	var b bare
	cni := false
	for i := 1; i < len(os.Args); i++ {
		switch os.Args[i] {
		case "-name":
			if i+1 < len(os.Args) {
				b.name = os.Args[i+1]
				i++
			}
		case "-cni":
			cni = true
		case "-describe-error":
			b.describeError = true
		}
	}
	switch {
	case b.name == "":
		sdk.Serve(&beta{})
	case cni:
		sdk.Serve(cniOnly{b})
	default:
		sdk.Serve(b)
	}
}
