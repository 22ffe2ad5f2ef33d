// Package app assembles switchyard-controller: engine, hub, gRPC server with
// TokenReview authentication, informer controller and status writer. The
// binary (cmd/switchyard-controller) and the integration tests both start the
// controller through Run, so they exercise the same wiring.
package app
