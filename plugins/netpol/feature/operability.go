package feature

import (
	"context"

	"switchyard.dev/switchyard/sdk"
)

var _ sdk.MetricsReporter = (*Netpol)(nil)

// Metrics exposes netpol's state and its rule counters on the agent's
// /metrics (the host adds plugin="netpol"). The counters are the last ones
// countersLoop read back, so a scrape does no I/O; with countersInterval
// 0s only the gauges are there.
func (p *Netpol) Metrics(_ context.Context, _ sdk.MetricsRequest, resp *sdk.MetricsResponse) error {
	p.mu.Lock()
	policies := 0
	if p.last != nil {
		policies = len(p.last.Policies)
	}
	rules, installed, counters := len(p.rules), len(p.installed), p.lastCounters
	epoch := p.node.Epoch
	p.mu.Unlock()
	gauge := func(name, help string, v float64) {
		resp.Metrics = append(resp.Metrics, sdk.Metric{Name: name, Help: help, Kind: sdk.MetricGauge, Value: v})
	}
	gauge("switchyard_netpol_policies", "Policies in this node's span.", float64(policies))
	gauge("switchyard_netpol_rules", "Rules with flows on this node.", float64(rules))
	gauge("switchyard_netpol_flows", "Flows netpol holds on the switch.", float64(installed))
	gauge("switchyard_netpol_epoch", "The flow epoch, moved by every rule change (see plugins/netpol/flows.Epoch).", float64(epoch))
	for _, c := range counters {
		labels := map[string]string{"policy": c.Policy, "rule": c.Rule, "direction": c.Direction, "action": c.Action}
		resp.Metrics = append(resp.Metrics,
			sdk.Metric{Name: "switchyard_netpol_rule_packets_total", Help: "Packets a rule decided, read back from its flows.",
				Kind: sdk.MetricCounter, Labels: labels, Value: float64(c.Packets)},
			sdk.Metric{Name: "switchyard_netpol_rule_bytes_total", Help: "Bytes of the packets a rule decided.",
				Kind: sdk.MetricCounter, Labels: labels, Value: float64(c.Bytes)})
	}
	return nil
}
