package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"switchyard.dev/switchyard/controller/distribute"
)

// Namespace prefixes every metric of the controller.
const Namespace = "switchyard_controller"

// Sources are what the collector reads at scrape time.
type Sources struct {
	// Objects is the number of objects per kind in the caches.
	Objects func() map[string]int
	// Streams is the per-node distribution state.
	Streams func() []distribute.NodeStream
}

// Controller is the controller's registry and its event metrics.
type Controller struct {
	Registry *prometheus.Registry

	compute *prometheus.HistogramVec
	reviews *prometheus.CounterVec
}

var (
	descObjects = prometheus.NewDesc(Namespace+"_objects", "Objects the controller's caches hold, by kind.", []string{"kind"}, nil)
	descStreams = prometheus.NewDesc(Namespace+"_node_streams", "Open PolicyDistribution Watch streams per node (0: the node's log is kept for a resume).", []string{"node"}, nil)
	descLag     = prometheus.NewDesc(Namespace+"_node_stream_lag_events", "Events computed for a node that no stream of it has sent yet.", []string{"node"}, nil)
	descNodes   = prometheus.NewDesc(Namespace+"_connected_nodes", "Nodes with at least one open Watch stream.", nil, nil)
)

// New makes the registry; src may have nil members (their metrics are
// then absent).
func New(src Sources) *Controller {
	m := &Controller{
		Registry: prometheus.NewRegistry(),
		compute: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "computation_duration_seconds",
			Help:    "Time the policy engine took for one object change, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10)}, []string{"kind"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "token_review_failures_total",
			Help: "TokenReviews that did not let a node in, by reason (unauthenticated, forbidden, error)."}, []string{"reason"}),
	}
	m.Registry.MustRegister(m.compute, m.reviews, &collector{src},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveCompute records one object change's computation.
func (m *Controller) ObserveCompute(kind string, took time.Duration) {
	m.compute.WithLabelValues(kind).Observe(took.Seconds())
}

// TokenReviewFailed counts a failed TokenReview.
func (m *Controller) TokenReviewFailed(reason string) { m.reviews.WithLabelValues(reason).Inc() }

type collector struct{ src Sources }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descObjects
	ch <- descStreams
	ch <- descLag
	ch <- descNodes
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if c.src.Objects != nil {
		for k, n := range c.src.Objects() {
			ch <- prometheus.MustNewConstMetric(descObjects, prometheus.GaugeValue, float64(n), k)
		}
	}
	if c.src.Streams != nil {
		connected := 0
		for _, s := range c.src.Streams() {
			ch <- prometheus.MustNewConstMetric(descStreams, prometheus.GaugeValue, float64(s.Streams), s.Node)
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(s.Lag), s.Node)
			if s.Streams > 0 {
				connected++
			}
		}
		ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(connected))
	}
}
