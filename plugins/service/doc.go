// Service is the plugin that replaces kube-proxy: it load-balances
// Kubernetes ClusterIP Services in br-int. It watches Services and
// EndpointSlices with the agent's credentials (sdk.Cluster) and keeps, for
// every Service port, an OVS select group with one bucket per ready
// endpoint; a new connection to the ClusterIP picks a bucket and is
// DNATed to that endpoint with ct(commit,nat) in a ct zone the host
// granted, in the PreRouting stage, so NetworkPolicy (EgressSecurity and
// later) sees the real endpoint. Replies are un-NATed by the same
// conntrack entry. See package flows for the tables and the path of a
// packet, and package feature for the watches.
//
//   - TCP, UDP and SCTP; several ports per Service; named target ports
//     (matched by port name in the EndpointSlices).
//   - Ready endpoints only; serving-but-terminating ones when none is
//     ready.
//   - No endpoint: a new connection gets a TCP RST or an ICMP port
//     unreachable at once (package reject, through a packet-in).
//   - Hairpin: a pod reaching itself through its Service is SNATed to a
//     link-local virtual IP (169.254.0.253) and sent back out of its port.
//   - The node reaches ClusterIPs through a route of the Service CIDRs into
//     the gateway (package hostnet).
//   - NodePort on the node's addresses: the node's kernel DNATs it (one
//     nftables table, switchyard-service) to a link-local NodePort address
//     routed into br-int, where a select group of its own balances it.
//     externalTrafficPolicy Local keeps the client's address and uses
//     local endpoints only (none: rejected); Cluster uses every endpoint
//     and SNATs to the node's gateway IP so answers come back. Answers of
//     every NodePort connection go back through the gateway, where the
//     kernel undoes its DNAT, so pods reach NodePorts on any node's
//     address too. Local is about external clients: the node's own pods
//     and the node itself (masqueraded to its gateway address) get every
//     endpoint of the ClusterIP, as with kube-proxy.
//   - internalTrafficPolicy Local: the ClusterIP uses local endpoints only.
//   - spec.externalIPs and load-balancer ingress IPs: each node routes them
//     into br-int (a /32 through the gateway), where they are balanced
//     like the NodePort (same traffic policies), for outside clients the
//     network routes to the node and for pods alike.
//   - sessionAffinity ClientIP: a learned flow per client holds its
//     endpoint until the client has opened no new connection for the
//     timeout (at most 65535 s, an OpenFlow idle timeout).
//   - Incremental: one Service's change rewrites only its group and flows.
//   - Conntrack hygiene: when a UDP endpoint leaves a Service port, the
//     conntrack entries of that port towards it are flushed.
//   - The pods of other nodes are in-cluster clients too: dialling a Local
//     address of this node they get every endpoint, SNATed to the gateway
//     address (they arrive with their own addresses, and the answer must
//     come back through this node). The plugin learns their pod CIDRs
//     from the host's node events.
//   - IPv6 and dual-stack Services, once a serviceCIDR is IPv6: each
//     address of a Service (spec.clusterIPs, external and load-balancer
//     IPs, the NodePort on the node's addresses of that family) is
//     balanced over the EndpointSlices of its own family, with all of the
//     above. The IPv6 hairpin source and NodePort address are unique local
//     addresses (fd00:5ce::fd, fd00:5ce::fc): a link-local one would be
//     on-link for the pods. The node routes the IPv6 Service CIDRs into
//     the gateway via the IPv6 hairpin address, and its ip6 nftables table
//     of the same name DNATs IPv6 NodePorts.
//
// Config (the plugin's section of the agent config, all optional):
// serviceCIDRs ([10.96.0.0/12]; add an IPv6 one for IPv6 Services),
// gateway (sy-gw0, podnet's), hairpinIP (169.254.0.253), nodePortIP
// (169.254.0.252), hairpinIPv6 (fd00:5ce::fd), nodePortIPv6 (fd00:5ce::fc).
package main
