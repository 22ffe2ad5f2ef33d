package agent

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchyard.dev/switchyard/host/metrics"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/sdkhost"
)

// Metrics is the agent's Prometheus registry: event metrics
// (host/metrics) and the state collector below.
func (a *Agent) Metrics() *metrics.Agent { return a.metrics }

// pluginMetricsTimeout bounds how long a scrape waits for one plugin's
// own metrics; a slow plugin loses its samples for that scrape only.
const pluginMetricsTimeout = time.Second

var (
	descFlows = prometheus.NewDesc(metrics.Namespace+"_plugin_flows",
		"Flows the plugin holds on the switch (the host's copy).", []string{"plugin"}, nil)
	descRestarts = prometheus.NewDesc(metrics.Namespace+"_plugin_restarts_total",
		"Times the host restarted the plugin's process since the agent started.", []string{"plugin"}, nil)
	descState = prometheus.NewDesc(metrics.Namespace+"_plugin_state",
		"1 for the plugin's current state (starting, running, synced, restarting, failed, stopped, unloading).", []string{"plugin", "state"}, nil)
	descSync = prometheus.NewDesc(metrics.Namespace+"_plugin_start_to_synced_seconds",
		"Time from the host's Start call to the plugin's Synced, for its current incarnation (0 until it synced).", []string{"plugin"}, nil)
	descOVS = prometheus.NewDesc(metrics.Namespace+"_ovs_connected",
		"1 while the OpenFlow connection to the bridge is up.", nil, nil)
	descScrapeErr = prometheus.NewDesc(metrics.Namespace+"_plugin_metrics_errors_total",
		"Scrapes in which the plugin's own metrics were missing or refused (since the agent started).", []string{"plugin"}, nil)
)

// metricName is what Prometheus accepts as a metric or label name.
var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// stateCollector reads the agent's state when Prometheus scrapes.
type stateCollector struct {
	a *Agent

	mu         sync.Mutex
	scrapeErrs map[string]float64
}

// An unchecked collector: plugins' metric names are known only at scrape.
func (c *stateCollector) Describe(chan<- *prometheus.Desc) {}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	a.ns.mu.Lock()
	up := !a.ns.ovsDown
	a.ns.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descOVS, prometheus.GaugeValue, b2f(up))

	type reporter struct {
		name string
		proc *sdkhost.Plugin
	}
	var reporters []reporter
	for _, p := range a.Plugins() {
		ch <- prometheus.MustNewConstMetric(descFlows, prometheus.GaugeValue, float64(p.Flows), p.Name)
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(p.Restarts), p.Name)
		ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, 1, p.Name, p.State)
		ch <- prometheus.MustNewConstMetric(descSync, prometheus.GaugeValue, p.SyncMillis/1000, p.Name)
		if slices.Contains(p.Capabilities, string(sdk.CapMetrics)) {
			if proc := a.liveProc(p.Name); proc != nil {
				reporters = append(reporters, reporter{p.Name, proc})
			}
		}
	}
	// Plugins answer side by side, so one slow plugin costs a scrape at
	// most pluginMetricsTimeout.
	var wg sync.WaitGroup
	results := make([][]prometheus.Metric, len(reporters))
	for i, r := range reporters {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), pluginMetricsTimeout)
			defer cancel()
			ms, err := r.proc.Metrics(ctx)
			if err != nil {
				a.log.Warn("plugin metrics missing from this scrape", "plugin", r.name, "error", err)
				c.countErr(r.name)
				return
			}
			results[i] = c.pluginMetrics(r.name, ms)
		})
	}
	wg.Wait()
	c.mu.Lock()
	for _, r := range reporters {
		ch <- prometheus.MustNewConstMetric(descScrapeErr, prometheus.CounterValue, c.scrapeErrs[r.name], r.name)
	}
	c.mu.Unlock()
	for _, ms := range results {
		for _, m := range ms {
			ch <- m
		}
	}
}

func (c *stateCollector) countErr(plugin string) {
	c.mu.Lock()
	c.scrapeErrs[plugin]++
	c.mu.Unlock()
}

// pluginMetrics turns a plugin's samples into Prometheus metrics with the
// plugin label added; samples that break the rules are dropped and
// logged, naming the plugin and the metric.
func (c *stateCollector) pluginMetrics(plugin string, ms []sdk.Metric) []prometheus.Metric {
	out := make([]prometheus.Metric, 0, len(ms))
	bad := func(m sdk.Metric, why string) {
		c.a.log.Warn("plugin metric dropped", "plugin", plugin, "metric", m.Name, "reason", why)
		c.countErr(plugin)
	}
	for _, m := range ms {
		if !metricName.MatchString(m.Name) || strings.HasPrefix(m.Name, metrics.Namespace+"_") {
			bad(m, "the name must be a Prometheus metric name not starting with "+metrics.Namespace+"_")
			continue
		}
		kind := prometheus.GaugeValue
		switch m.Kind {
		case sdk.MetricCounter:
			kind = prometheus.CounterValue
		case sdk.MetricGauge:
		default:
			bad(m, "kind must be sdk.MetricCounter or sdk.MetricGauge")
			continue
		}
		names := []string{"plugin"}
		values := []string{plugin}
		keys := make([]string, 0, len(m.Labels))
		for k := range m.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		ok := true
		for _, k := range keys {
			if k == "plugin" || !metricName.MatchString(k) || strings.HasPrefix(k, "__") {
				ok = false
				break
			}
			names, values = append(names, k), append(values, m.Labels[k])
		}
		if !ok {
			bad(m, `label names must be Prometheus label names other than "plugin"`)
			continue
		}
		help := m.Help
		if help == "" {
			help = "Reported by plugin " + plugin + "."
		}
		pm, err := prometheus.NewConstMetric(prometheus.NewDesc(m.Name, help, names, nil), kind, m.Value, values...)
		if err != nil {
			bad(m, err.Error())
			continue
		}
		out = append(out, pm)
	}
	return out
}

// liveProc is the plugin's current process once it started, or nil.
func (a *Agent) liveProc(name string) *sdkhost.Plugin {
	a.pmu.Lock()
	r := a.plugins[name]
	a.pmu.Unlock()
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started || r.proc == nil {
		return nil
	}
	return r.proc
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
