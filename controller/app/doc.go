// Package app assembles switchyard-controller: engine, hub, gRPC server with
// TokenReview authentication, informer controller and status writer. The
// binary (cmd/switchyard-controller) and the integration tests both start the
// controller through Run, so they exercise the same wiring; assemble, which
// Run calls, is also what the end-to-end benchmarks (bench_test.go:
// BenchmarkControllerInit*, beside the baseline BenchmarkInformersOnly*) run
// over fake clientsets.
package app
