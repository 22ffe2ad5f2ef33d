// Package ipam gives pods addresses from the node's pod CIDRs, one per
// address family, using the host-local allocator of containernetworking/
// plugins as a library with its on-disk store, so allocations survive a
// restart of the plugin and are shared safely with any other process using
// the same directory (the store takes a file lock).
//
// The first address of each CIDR is the gateway and is never handed out.
// Start at New and Allocator.Allocate.
package ipam
