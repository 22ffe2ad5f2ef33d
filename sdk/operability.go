package sdk

import "context"

// Operability capabilities: what a plugin offers the operator's tools.
const (
	CapMetrics       Capability = "metrics"
	CapDescribeFlows Capability = "describe-flows"
)

// MetricKind says how Prometheus treats a Metric.
type MetricKind int

const (
	// MetricCounter only goes up (resets when the plugin restarts).
	MetricCounter MetricKind = iota + 1
	// MetricGauge goes up and down.
	MetricGauge
)

// Metric is one sample of a plugin's own metric. The host exposes it on
// its /metrics endpoint under Name with Labels plus plugin="<name>": the
// host sets that label, so a plugin's metric names need not repeat it.
// Name must be a Prometheus metric name not starting with
// "switchyard_agent_" (the host's own); every sample of one Name must have
// the same Kind, Help and label names.
type Metric struct {
	Name   string
	Help   string
	Kind   MetricKind
	Labels map[string]string
	Value  float64
}

// MetricsRequest asks for the plugin's metrics at scrape time.
type MetricsRequest struct{}

// MetricsResponse carries the samples.
type MetricsResponse struct {
	Metrics []Metric
}

// MetricsReporter is a plugin with metrics of its own (for example
// netpol's rule counters). The host calls Metrics when Prometheus scrapes
// the agent, with a short deadline: answer from memory, do no I/O.
type MetricsReporter interface {
	Metrics(ctx context.Context, req MetricsRequest, resp *MetricsResponse) error
}

// DescribeFlowRequest names one of the plugin's flows, as a trace matched
// it.
type DescribeFlowRequest struct {
	Table    string
	Priority uint16
	// Match is the flow's match as the switch holds it (ovs-ofctl text,
	// registers as the host allocated them); Tag is the usual key.
	Match string
	// Tag is the flow's Tag (the plugin's 32 bits of the cookie).
	Tag uint32
}

// DescribeFlowResponse says what the flow means to the plugin, in the
// plugin's words: e.g. `policy "ns/deny-db" ingress rule 0 (drop)`.
// Empty means nothing to add.
type DescribeFlowResponse struct {
	Description string
}

// FlowDescriber is a plugin that can say what its flows mean, so a trace
// that hits one names the policy and rule rather than only the table.
// The host calls it only for flows the plugin owns; answer from memory.
type FlowDescriber interface {
	DescribeFlow(ctx context.Context, req DescribeFlowRequest, resp *DescribeFlowResponse) error
}
