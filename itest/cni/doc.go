// Package cni holds the integration tests of the CNI path: the thin
// switchyard-cni binary, the host's CNI server and the podnet plugin, run
// as root against real network namespaces and a real OVS.
//
// blocks_test.go exercises podnet's building blocks (veth, gratuitous ARP)
// at their own level; e2e_test.go and versions_test.go drive the built
// binaries (switchyard-cni, switchyard-agent, podnet) through libcni,
// exactly as a container runtime would; bench_test.go compares the whole
// path with the reference bridge + host-local plugins.
package cni
