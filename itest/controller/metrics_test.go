package controller

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// checkMetrics scrapes the controller's /metrics, parses it as Prometheus
// does, and checks what the earlier subtests did shows: pods and policies
// computed, the three nodes connected with nothing left to send, and the
// refused watches counted as failed TokenReviews.
func checkMetrics(t *testing.T, addr string, nodes []string) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping the controller: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	get := func(name string, labels map[string]string) (float64, error) {
		f, ok := fams[name]
		if !ok {
			return 0, fmt.Errorf("%s not exposed", name)
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), nil
			case m.Counter != nil:
				return m.GetCounter().GetValue(), nil
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), nil
			}
		}
		return 0, fmt.Errorf("%s%v: no such sample", name, labels)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"switchyard_controller_objects", map[string]string{"kind": "Pod"}, 3},
		{"switchyard_controller_objects", map[string]string{"kind": "Node"}, 3},
		{"switchyard_controller_objects", map[string]string{"kind": "K8sNetworkPolicy"}, 1},
		{"switchyard_controller_computation_duration_seconds", map[string]string{"kind": "Pod"}, 3},
		{"switchyard_controller_computation_duration_seconds", map[string]string{"kind": "K8sNetworkPolicy"}, 1},
		{"switchyard_controller_connected_nodes", nil, 3},
		// unauthenticated: the garbage token; forbidden: admin token,
		// intruder ServiceAccount (the other refusals are not TokenReview's).
		{"switchyard_controller_token_review_failures_total", map[string]string{"reason": "unauthenticated"}, 1},
		{"switchyard_controller_token_review_failures_total", map[string]string{"reason": "forbidden"}, 2},
	} {
		v, err := get(c.name, c.labels)
		if err != nil {
			t.Error(err)
			continue
		}
		if v < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, v, c.min)
		}
	}
	for _, n := range nodes {
		if _, err := get("switchyard_controller_node_stream_lag_events", map[string]string{"node": n}); err != nil {
			t.Error(err)
		}
	}
}
