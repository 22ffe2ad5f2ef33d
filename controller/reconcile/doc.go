// Package reconcile wires the computation engine to the apiserver in the
// style of kubernetes/sample-controller: shared informers feed a
// rate-limited workqueue of object keys, and a level-based sync handler
// reads the object from its lister and hands it to compute.Engine (or
// deletes it there when it is gone).
//
// It also creates the built-in Tiers at start and runs the status writer
// (status.go), which writes phase, observedGeneration, realized N of M and
// the Valid condition onto native policies.
//
// Start with Controller in controller.go.
package reconcile
