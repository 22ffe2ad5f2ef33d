package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"switchyard.dev/switchyard/sdk"
)

// Namespace prefixes every metric the agent defines; plugin-registered
// metrics may not use it.
const Namespace = "switchyard_agent"

// latencyBuckets span 100µs to ~26s: a one-flow batch on an idle switch
// up to a 20,000-flow batch on a busy one, and a CNI ADD likewise.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 4, 10)

// Agent is the agent's registry and its event metrics.
type Agent struct {
	Registry *prometheus.Registry

	batches    *prometheus.CounterVec
	operations *prometheus.CounterVec
	batchTime  *prometheus.HistogramVec
	refusals   *prometheus.CounterVec
	cniTime    *prometheus.HistogramVec
	yielded    *prometheus.CounterVec
}

// NewAgent makes a registry holding the agent's event metrics and the Go
// runtime and process collectors; extra collectors (the agent's state)
// are registered by the caller.
func NewAgent() *Agent {
	m := &Agent{
		Registry: prometheus.NewRegistry(),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "plugin_batches_total",
			Help: "Flow batches a plugin submitted, by result (applied or refused)."}, []string{"plugin", "result"}),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "plugin_batch_operations_total",
			Help: "Operations (flow, group and meter adds, modifies and deletes) in the batches a plugin had applied."}, []string{"plugin"}),
		batchTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "plugin_batch_duration_seconds",
			Help: "Time from a plugin's batch reaching the host to the switch confirming its bundle (or the refusal).", Buckets: latencyBuckets},
			[]string{"plugin"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "plugin_refusals_total",
			Help: "Batches the host refused, by plugin and reason (invalid, conflict, not_owner, unknown_table, unallocated_field, backward_jump, limit, switch, other)."},
			[]string{"plugin", "reason"}),
		cniTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "cni_request_duration_seconds",
			Help: "CNI requests served by the agent, by verb (ADD, DEL, CHECK, STATUS, GC) and result (ok or error).", Buckets: latencyBuckets},
			[]string{"verb", "result"}),
		yielded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "plugin_batch_yield_seconds_total",
			Help: "Time a plugin's large batches paused to let pod requests (CNI ADD, DEL, CHECK) go first; at most 0.25 s per batch."},
			[]string{"plugin"}),
	}
	m.Registry.MustRegister(m.batches, m.operations, m.batchTime, m.refusals, m.cniTime, m.yielded,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// reasons maps the host's error sentinels to refusal reasons, most
// specific first.
var reasons = []struct {
	err    error
	reason string
}{
	{sdk.ErrConflict, "conflict"},
	{sdk.ErrNotOwner, "not_owner"},
	{sdk.ErrUnknownTable, "unknown_table"},
	{sdk.ErrUnallocatedField, "unallocated_field"},
	{sdk.ErrBackwardJump, "backward_jump"},
	{sdk.ErrLimit, "limit"},
	{sdk.ErrSwitch, "switch"},
	{sdk.ErrInvalid, "invalid"},
}

// Reason names why a batch was refused, for the refusals metric.
func Reason(err error) string {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "other"
}

// ObserveBatch records one batch of a plugin: ops operations, how long
// it took, and err if it was refused. A nil *Agent records nothing.
func (m *Agent) ObserveBatch(plugin string, ops int, took time.Duration, err error) {
	if m == nil {
		return
	}
	m.batchTime.WithLabelValues(plugin).Observe(took.Seconds())
	if err != nil {
		m.batches.WithLabelValues(plugin, "refused").Inc()
		m.refusals.WithLabelValues(plugin, Reason(err)).Inc()
		return
	}
	m.batches.WithLabelValues(plugin, "applied").Inc()
	m.operations.WithLabelValues(plugin).Add(float64(ops))
}

// ObserveYield records how long one batch of plugin paused for pod
// requests. A nil *Agent records nothing.
func (m *Agent) ObserveYield(plugin string, paused time.Duration) {
	if m == nil {
		return
	}
	m.yielded.WithLabelValues(plugin).Add(paused.Seconds())
}

// ObserveCNI records one CNI request. A nil *Agent records nothing.
func (m *Agent) ObserveCNI(verb string, took time.Duration, failed bool) {
	if m == nil {
		return
	}
	result := "ok"
	if failed {
		result = "error"
	}
	m.cniTime.WithLabelValues(verb, result).Observe(took.Seconds())
}

// Handler serves the registry in the Prometheus text format.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Serve serves /metrics for g on addr until ctx ends and returns the
// address it listens on. what names the server in errors and logs
// ("agent", "controller").
func Serve(ctx context.Context, addr, what string, g prometheus.Gatherer, log *slog.Logger) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s metrics port: %w (set metrics.port to a free port, or 0 to serve metrics on the API socket only)", what, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(g))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "server", what, "error", err)
		}
	}()
	return l.Addr().String(), nil
}
