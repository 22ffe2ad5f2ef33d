// Package netpolmodel is the Kubernetes e2e NetworkPolicy model on the real
// test cluster: namespaces x, y and z, pods a, b and c in each (placed on
// the nodes by a function the caller chooses), each serving TCP, UDP and
// SCTP on ports 80 and 81 with named container ports (serve-80-tcp, ...),
// the real switchyard-controller in the test process and the agents with
// podnet and netpol on every node.
//
// A test applies policies through the apiserver and checks a truth table
// (Reachability) for a protocol and port with Env.Check, which probes the
// whole matrix in parallel and retries until the datapath agrees or the
// wait runs out; on failure it prints the expected and the actual table.
// Env.Probe checks one pair.
//
// Where to start: Start (model.go), then Reachability.
package netpolmodel
