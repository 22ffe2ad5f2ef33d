package feature

import (
	"context"
	"log/slog"
	"testing"

	"switchyard.dev/switchyard/plugins/netpol/flows"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// TestMetrics: the metrics carry the gauges and the last counters with
// the rule's labels.
func TestMetrics(t *testing.T) {
	p := New()
	p.host, p.log, p.installed = &countingHost{}, slog.New(slog.DiscardHandler), map[flow.Key]flow.Flow{}
	p.reports, p.node = make(chan map[string]int64, 1), flows.Node{CTZone: 1}
	ctx := context.Background()
	if err := p.sync(ctx, span(), "first"); err != nil {
		t.Fatal(err)
	}
	var tag uint32
	for tg := range p.rules {
		tag = tg
	}
	if tag == 0 {
		t.Fatal("the span's rule got no tag")
	}
	p.lastCounters = []RuleCounters{{Tag: tag, Policy: "x/p", Rule: "web", Direction: "ingress", Action: "Allow", Packets: 7, Bytes: 700}}
	var m sdk.MetricsResponse
	if err := p.Metrics(ctx, sdk.MetricsRequest{}, &m); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range m.Metrics {
		key := s.Name
		if s.Labels["rule"] != "" {
			key += "{" + s.Labels["policy"] + "," + s.Labels["rule"] + "," + s.Labels["direction"] + "," + s.Labels["action"] + "}"
		}
		got[key] = s.Value
	}
	for k, v := range map[string]float64{
		"switchyard_netpol_policies": 1, "switchyard_netpol_rules": 1, "switchyard_netpol_flows": float64(len(p.installed)),
		"switchyard_netpol_rule_packets_total{x/p,web,ingress,Allow}": 7, "switchyard_netpol_rule_bytes_total{x/p,web,ingress,Allow}": 700,
	} {
		if got[k] != v {
			t.Errorf("metric %s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
