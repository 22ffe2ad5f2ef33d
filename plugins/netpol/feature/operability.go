package feature

import (
	"context"
	"fmt"
	"strings"

	"switchyard.dev/switchyard/plugins/netpol/flows"
	"switchyard.dev/switchyard/sdk"
)

var (
	_ sdk.MetricsReporter = (*Netpol)(nil)
	_ sdk.FlowDescriber   = (*Netpol)(nil)
)

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

// DescribeFlow names what one of netpol's flows stands for, so a trace
// through it names the policy and the rule: a rule's flows carry its tag;
// the other tables are netpol's fixed machinery.
func (p *Netpol) DescribeFlow(_ context.Context, req sdk.DescribeFlowRequest, resp *sdk.DescribeFlowResponse) error {
	p.mu.Lock()
	r := p.rules[req.Tag]
	p.mu.Unlock()
	if r != nil {
		name := r.Name
		if name == "" {
			name = "(unnamed)"
		}
		resp.Description = fmt.Sprintf("policy %q %s rule %s: %s", r.Policy, r.Direction, name, strings.ToLower(r.Action))
		return nil
	}
	resp.Description = describeTable(req.Table, req.Match)
	return nil
}

// describeTable explains a flow that belongs to no rule.
func describeTable(table, match string) string {
	switch table {
	case flows.EgressIsolation:
		return "default deny: a Kubernetes NetworkPolicy isolates the source pod's egress and no rule allowed this"
	case flows.IngressIsolation:
		return "default deny: a Kubernetes NetworkPolicy isolates the destination pod's ingress and no rule allowed this"
	case flows.EgressBaseline, flows.IngressBaseline:
		return "baseline tier"
	case flows.CTState:
		return "conntrack lookup (netpol's zone)"
	case flows.CTCommit:
		return "commit of a new connection every security stage allowed"
	case flows.SCTPReplies:
		return "reply of an allowed SCTP association (learned)"
	case flows.RejectResume:
		return "entry of netpol's own reject replies"
	}
	switch {
	case strings.Contains(match, "+rpl"):
		return "reply of an allowed connection"
	case strings.Contains(match, "+rel"):
		return "packet related to an allowed connection (ICMP error)"
	case strings.Contains(match, "+est"):
		return "packet of an established connection"
	}
	return ""
}
