// Package reject builds the answer the switch gives, through the service
// plugin, to a new connection towards a Service port that has no
// endpoint: a TCP RST for TCP, an ICMP destination (port) unreachable for
// UDP and SCTP, as kube-proxy does. The client then fails at once instead
// of waiting for a timeout.
//
// Answer reads the packet the switch sent up (untrusted bytes: it is
// fuzzed) and writes the answer as a frame addressed to the node's
// gateway MAC, from the Service's address, so the switch routes it back
// to the client like any packet to a pod or to the node. IPv4 and IPv6
// (for IPv6, a TCP RST or an ICMPv6 port unreachable).
package reject
