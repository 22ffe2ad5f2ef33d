// Package flows computes the service plugin's OpenFlow pipeline: the
// tables, register fields and shared resources it declares, the flows that
// are the same on every node, and, for one Service port, the select group
// and flows that load-balance it. It is pure (no I/O), so the exact flow
// set is unit-tested, and the same functions give what to add, what to
// delete and what a restarted plugin re-installs.
//
// The path of a packet (IP pipeline, tables in stage order; IPv6 packets
// take the same path, with the IPv6 counterparts of the addresses):
//
//	ConntrackState  service.unsnat     nw_dst=HairpinIP or GatewayIP: ct(zone=snat,nat) undoes a
//	                                   hairpin or NodePort SNAT
//	ConntrackState  service.conntrack  every IP packet: ct(zone=dnat,nat): an established
//	                                   service connection gets its DNAT (or, replies, its un-DNAT)
//	ConntrackState  service.ct_mark    ct_mark hairpin bit → reg service.hairpin=1, SNAT bit →
//	                                   reg service.snat=1
//	PreRouting      service.lb         ct_state=+new+trk to a ClusterIP:port (or the NodePort
//	                                   address:NodePort, its own group) → reg service.svc = the
//	                                   port's group ID, group:ID (select, dp_hash); no endpoint →
//	                                   controller (the plugin answers with a TCP RST or an ICMP
//	                                   port unreachable)
//	                                   sessionAffinity ClientIP: resubmit(service.affinity), then
//	                                   goto service.select; anything else: goto service.dnat
//	PreRouting      service.affinity   learned: client, Service address, port → its endpoint
//	PreRouting      service.select     the learned endpoint (goto service.dnat) or group:ID
//	                (group bucket)     reg service.ep_ip/ep_port = the endpoint, resubmit(service.dnat)
//	PreRouting      service.dnat       svc, ep_ip, ep_port → ct(commit,zone=dnat,nat(dst=ep:port),
//	                                   ct_mark service bit); from the endpoint itself (hairpin)
//	                                   also the hairpin bit; with affinity, learn into
//	                                   service.affinity first
//	PreRouting      service.inject     empty: where the plugin's reject packets re-enter the
//	                                   pipeline (podnet's routing then delivers them)
//	PreRouting      service.l4         SCTP only: the target port (forward) and the Service port
//	                                   (replies), which the userspace conntrack cannot translate
//	(EgressSecurity, Routing, ...: other plugins see the real endpoint as destination)
//	PostRouting     service.snat       hairpin: ct(commit,zone=snat,nat(src=HairpinIP)), so the
//	                                   endpoint answers the virtual IP, not itself; NodePort with
//	                                   externalTrafficPolicy Cluster: nat(src=GatewayIP), so the
//	                                   answer of an endpoint on another node comes back here;
//	                                   answers of NodePort connections (from NodePortIP once
//	                                   un-DNATed): eth_dst=gateway MAC, so they go back through
//	                                   the node's kernel, which undoes its DNAT of the node address
//	                                   (a pod client would drop them otherwise)
//	Conntrack       service.output     hairpin: output to IN_PORT (the endpoint is the client),
//	                                   after every policy stage, before podnet's output; a
//	                                   hairpin from the gateway only if routed back to it (a
//	                                   host-network endpoint), and never a NodePort answer
//
// One select group per Service port, with one bucket per endpoint, so an
// endpoint change rewrites that group and the service's dnat flows only.
// Every flow of a Service carries the Service's tag (ServiceTag).
//
// The node reaches ClusterIPs through a route of the Service CIDR via
// HairpinIP on the gateway device, HairpinIP being a permanent neighbour
// at the gateway's own MAC: the packets enter br-int from the gateway port
// addressed like routed pod traffic (package hostnet).
//
// IPv6: a Service address of either family is a Port of its own, with its
// own group, balanced over the endpoints of its family. An IPv6 endpoint
// takes four 32-bit register words (a field is at most 32 bits and never
// spans two registers): service.ep_ip6_0..2 hold bits 127..32 and
// service.ep_ip, the IPv4 endpoint's field, its low word (a packet is of
// one family). The buckets load them, the dnat flows match all four, and
// the affinity learn copies them. The node-wide flows have IPv6
// counterparts with HairpinIP6, NodePortIP6 and GatewayIP6. With every
// in-tree plugin loaded (podnet, tunnel, netpol, service, egress) the
// registers hold 37 well-known bits, 20 of netpol's and 171 of the
// service plugin's: 228 of 512. Each 32-bit field takes a register of
// its own (with netpol registered first: service's in reg0 bits 25-27 and
// reg2-reg7), so reg8-reg15 stay free. Without an IPv6 Service CIDR the
// plugin does not ask for the IPv6 words: 75 bits, 132 of 512.
//
// To add a flow kind: add it to StaticFlows or PortFlows and extend the
// golden lists in flows_test.go.
package flows
