package metrics

import (
	"errors"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"switchyard.dev/switchyard/sdk"
)

func TestReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: plugin %q: 2 flows collide", sdk.ErrConflict, "p"), "conflict"},
		{fmt.Errorf("batch op 3: %w", fmt.Errorf("%w: table t", sdk.ErrNotOwner)), "not_owner"},
		{fmt.Errorf("%w: over", sdk.ErrLimit), "limit"},
		{fmt.Errorf("%w: refused", sdk.ErrSwitch), "switch"},
		{fmt.Errorf("%w: bad", sdk.ErrInvalid), "invalid"},
		{errors.New("something else"), "other"},
	} {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// sample finds the value of one series in a gathered registry.
func sample(t *testing.T, m *Agent, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return s.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("%s%v: no such series", name, labels)
	return 0
}

func TestObserve(t *testing.T) {
	m := NewAgent()
	m.ObserveBatch("p", 7, time.Millisecond, nil)
	m.ObserveBatch("p", 3, time.Millisecond, fmt.Errorf("%w: x", sdk.ErrConflict))
	m.ObserveCNI("ADD", time.Millisecond, false)
	m.ObserveYield("p", 250*time.Millisecond)
	m.ObserveYield("p", 250*time.Millisecond)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{Namespace + "_plugin_batches_total", map[string]string{"plugin": "p", "result": "applied"}, 1},
		{Namespace + "_plugin_batches_total", map[string]string{"plugin": "p", "result": "refused"}, 1},
		{Namespace + "_plugin_batch_operations_total", map[string]string{"plugin": "p"}, 7}, // refused ones excluded
		{Namespace + "_plugin_refusals_total", map[string]string{"plugin": "p", "reason": "conflict"}, 1},
		{Namespace + "_plugin_batch_duration_seconds", map[string]string{"plugin": "p"}, 2},
		{Namespace + "_cni_request_duration_seconds", map[string]string{"verb": "ADD", "result": "ok"}, 1},
		{Namespace + "_plugin_batch_yield_seconds_total", map[string]string{"plugin": "p"}, 0.5},
	} {
		if got := sample(t, m, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// A nil *Agent records nothing and does not panic.
	var nilm *Agent
	nilm.ObserveBatch("p", 1, 0, nil)
	nilm.ObserveCNI("DEL", 0, true)
	nilm.ObserveYield("p", time.Second)
}
