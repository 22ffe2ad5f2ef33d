package agent

import (
	"log/slog"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"switchyard.dev/switchyard/sdk"
)

func TestPluginMetrics(t *testing.T) {
	c := &stateCollector{a: &Agent{log: slog.New(slog.DiscardHandler)}, scrapeErrs: map[string]float64{}}
	for _, tc := range []struct {
		name string
		m    sdk.Metric
		ok   bool
	}{
		{"counter with labels", sdk.Metric{Name: "netpol_rule_packets_total", Kind: sdk.MetricCounter, Labels: map[string]string{"rule": "r1"}, Value: 3}, true},
		{"gauge without help", sdk.Metric{Name: "x_rules", Kind: sdk.MetricGauge, Value: 1}, true},
		{"host namespace", sdk.Metric{Name: "switchyard_agent_plugin_flows", Kind: sdk.MetricGauge}, false},
		{"bad name", sdk.Metric{Name: "9lives", Kind: sdk.MetricGauge}, false},
		{"no kind", sdk.Metric{Name: "x", Value: 1}, false},
		{"plugin label", sdk.Metric{Name: "x", Kind: sdk.MetricGauge, Labels: map[string]string{"plugin": "other"}}, false},
		{"reserved label", sdk.Metric{Name: "x", Kind: sdk.MetricGauge, Labels: map[string]string{"__name__": "y"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := c.pluginMetrics("p", []sdk.Metric{tc.m})
			if got := len(out) == 1; got != tc.ok {
				t.Fatalf("accepted = %v, want %v", got, tc.ok)
			}
			if !tc.ok {
				return
			}
			var d dto.Metric
			if err := out[0].Write(&d); err != nil {
				t.Fatal(err)
			}
			labels := map[string]string{}
			for _, l := range d.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["plugin"] != "p" || len(labels) != len(tc.m.Labels)+1 {
				t.Errorf("labels %v, want the plugin's plus plugin=p", labels)
			}
		})
	}
	if c.scrapeErrs["p"] != 5 {
		t.Errorf("dropped samples counted %v, want 5", c.scrapeErrs["p"])
	}
}
