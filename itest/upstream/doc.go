// Package upstream builds and caches the upstream binaries the harness runs:
// kube-apiserver and etcd, from the pinned tools module in ../tools.
//
// The build takes about nine minutes on two cores the first time on a
// machine, so the result is cached under ~/.cache/switchyard/tools keyed by a
// hash of the tools module; later runs find the binaries in place.
package upstream
