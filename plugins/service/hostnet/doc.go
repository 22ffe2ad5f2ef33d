// Package hostnet is what the service plugin changes in the node's network
// namespace: a route of each Service CIDR through the gateway device, via a
// virtual next hop that is a permanent neighbour at the gateway's own MAC,
// so the node's own connections to ClusterIPs enter br-int from the
// gateway port and are balanced there like a pod's; and the nftables
// table that hands NodePorts to br-int (nodeport.go). Each IP family has
// its own next hop (an IPv4 link-local one, an IPv6 unique local one) and
// its own table (families ip and ip6). Every route it adds carries
// RouteProtocol (proto 89), so that a restarted plugin finds all of its
// routes, whatever configuration made them, and removes those it no
// longer wants.
package hostnet
