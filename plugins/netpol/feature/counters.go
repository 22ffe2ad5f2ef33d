package feature

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"time"

	"switchyard.dev/switchyard/sdk"
)

// RuleCounters are one rule's packet and byte counters: the sum over the
// flows that decide for it (its conjunction and plain flows carry its tag).
type RuleCounters struct {
	Tag       uint32 `json:"tag"`
	Policy    string `json:"policy"`
	PolicyUID string `json:"policyUID"`
	Rule      string `json:"rule"`
	Direction string `json:"direction"`
	Action    string `json:"action"`
	Packets   uint64 `json:"packets"`
	Bytes     uint64 `json:"bytes"`
}

// Counters reads the rules' counters back from the switch.
func (p *Netpol) Counters(ctx context.Context) ([]RuleCounters, error) {
	p.mu.Lock()
	rules := p.rules
	p.mu.Unlock()
	stats, err := p.host.Flows(ctx, sdk.FlowFilter{})
	if err != nil {
		return nil, err
	}
	by := map[uint32]*RuleCounters{}
	for tag, r := range rules {
		by[tag] = &RuleCounters{Tag: tag, Policy: r.Policy, PolicyUID: r.PolicyUID, Rule: r.Name,
			Direction: r.Direction.String(), Action: r.Action}
	}
	for _, st := range stats {
		if c := by[st.Flow.Tag]; c != nil {
			c.Packets += st.Packets
			c.Bytes += st.Bytes
		}
	}
	out := make([]RuleCounters, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Policy != out[j].Policy {
			return out[i].Policy < out[j].Policy
		}
		return out[i].Tag < out[j].Tag
	})
	return out, nil
}

// countersLoop writes the counters to StateDir/counters.json (atomically)
// every interval, for operators and tests.
func (p *Netpol) countersLoop(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	path := filepath.Join(p.cfg.StateDir, "counters.json")
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		cs, err := p.Counters(rctx)
		cancel()
		if err != nil {
			p.log.Debug("reading rule counters failed", "error", err)
			continue
		}
		b, _ := json.MarshalIndent(cs, "", "  ")
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err == nil {
			os.Rename(tmp, path)
		}
	}
}
