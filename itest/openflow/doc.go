// Package openflow holds the live tests and benchmarks of
// switchyard.dev/switchyard/host/openflow against a real ovs-vswitchd
// (userspace datapath, started by the itest/ovs harness). They need root
// and the openvswitch-switch package, and fail (never skip) without them.
//
// Start with live_test.go (install, dump, delete, atomic bundles,
// reconnect) and bench_test.go (100k-flow install vs `ovs-ofctl --bundle
// add-flows`).
package openflow
