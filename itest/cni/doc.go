// Package cni holds the integration tests of the CNI path: the thin
// switchyard-cni binary, the host's CNI server and the podnet plugin, run
// as root against real network namespaces and a real OVS.
//
// blocks_test.go exercises podnet's building blocks (veth, gratuitous ARP,
// IPAM on disk) at their own level; e2e_test.go drives the built binaries
// through libcni, exactly as a container runtime would.
package cni
