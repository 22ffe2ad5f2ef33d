// Package ipam gives pods addresses from the node's pod CIDRs, one per
// address family, using the host-local allocator of containernetworking/
// plugins as a library with its on-disk store (one file per address), so
// allocations survive a restart of the plugin. The Allocator keeps an
// index of the store by attachment, read once when it opens, so an ADD or
// DEL touches only its own files; one Allocator at a time owns a
// directory.
//
// The first address of each CIDR is the gateway and is never handed out.
// Start at New and Allocator.Allocate.
package ipam
