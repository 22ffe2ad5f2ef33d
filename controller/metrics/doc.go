// Package metrics holds switchyard-controller's Prometheus metrics:
// computation time per object kind, the objects its caches hold, each
// node's distribution stream (connected, lag in events) and failed
// TokenReviews. Counts are read at scrape time from the controller and
// the hub (a prometheus.Collector), so nothing is kept twice.
//
// Where to start: New.
package metrics
