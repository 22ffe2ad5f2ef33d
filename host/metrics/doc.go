// Package metrics holds the Prometheus metrics of switchyard-agent and
// serves them (client_golang's text exposition on /metrics).
//
// Two kinds live here. Events the agent counts as they happen (batches,
// refusals, batch latency, CNI request latency) are counters and
// histograms updated by the code paths themselves (Agent.ObserveBatch,
// Agent.ObserveCNI). State the agent already keeps (flows per plugin,
// restarts, Start-to-Synced time, OVS connection, the plugins' own
// metrics) is read only when Prometheus scrapes, through a
// prometheus.Collector the agent registers (host/agent/metrics.go), so an
// idle agent spends nothing on it between scrapes.
//
// Every per-plugin series carries a "plugin" label; plugin-registered
// metrics (sdk.MetricsReporter) get it too, added by the host, so a
// plugin cannot pretend to be another.
//
// Where to start: NewAgent, then Serve.
package metrics
