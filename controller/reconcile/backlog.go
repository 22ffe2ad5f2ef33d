package reconcile

import (
	"context"
	"sync/atomic"

	"k8s.io/client-go/util/workqueue"
)

// backlog counts the keys the queue still owes work for: queued, or taken
// by a worker and not yet Done. Counting beside the queue (Len plus an
// in-flight counter) cannot be exact: between Get returning and the worker
// counting itself, a key is in neither. So the count is fed by the queue's
// own metrics hooks, which it calls under its lock: the depth gauge goes up
// exactly when a key becomes dirty (queued, or re-queued while a worker
// holds it) and each Done observes one work duration. Every dirty mark is
// followed by exactly one Get and one Done, so marks minus Dones is the
// backlog, with no window.
//
// A key waiting out a retry backoff (AddRateLimited) is not counted until
// its delay ends: an object that keeps failing must not hold the controller
// un-Ready forever; its error is logged on each try.
type backlog struct {
	n atomic.Int64
	// empty receives (without blocking the queue) when n drops to zero.
	empty chan struct{}
}

func newBacklog() *backlog { return &backlog{empty: make(chan struct{}, 1)} }

func (b *backlog) done() {
	if b.n.Add(-1) == 0 {
		select {
		case b.empty <- struct{}{}:
		default:
		}
	}
}

// waitEmpty blocks until the backlog is empty; false if ctx ended first.
func (b *backlog) waitEmpty(ctx context.Context) bool {
	for b.n.Load() != 0 {
		select {
		case <-b.empty:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// backlog is the queue's MetricsProvider; only the two hooks above count.
var _ workqueue.MetricsProvider = (*backlog)(nil)

type dirtyGauge struct{ b *backlog }

func (g dirtyGauge) Inc() { g.b.n.Add(1) }
func (dirtyGauge) Dec()   {} // a Get moves a key from queued to in-flight: no change

type doneHistogram struct{ b *backlog }

func (h doneHistogram) Observe(float64) { h.b.done() }

type noMetric struct{}

func (noMetric) Inc()            {}
func (noMetric) Set(float64)     {}
func (noMetric) Observe(float64) {}

func (b *backlog) NewDepthMetric(string) workqueue.GaugeMetric            { return dirtyGauge{b} }
func (b *backlog) NewWorkDurationMetric(string) workqueue.HistogramMetric { return doneHistogram{b} }
func (*backlog) NewAddsMetric(string) workqueue.CounterMetric             { return noMetric{} }
func (*backlog) NewLatencyMetric(string) workqueue.HistogramMetric        { return noMetric{} }
func (*backlog) NewRetriesMetric(string) workqueue.CounterMetric          { return noMetric{} }
func (*backlog) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
func (*backlog) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
