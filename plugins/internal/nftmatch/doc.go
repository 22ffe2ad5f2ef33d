// Package nftmatch builds the nftables expressions the plugins' host NAT
// tables share: an address prefix of the IPv4 or IPv6 header, an output
// interface name, a packet mark as the kernel holds it. The plugins own
// their tables (github.com/google/nftables); this package only spells the
// matches, so a table of one family never compares with the other's
// header offsets.
package nftmatch
