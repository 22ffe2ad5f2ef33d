// Egress is the plugin that gives the pods an Egress selects a fixed
// source IP when they reach outside the cluster, as Antrea's Egress does,
// with high availability.
//
// The controller (controller/egress) allocates each Egress an IP from its
// ExternalIPPool, one of each family when the pool has ranges of both
// (dual-stack), and records them in status.egressIPs (status.egressIP is
// the first, IPv4 if any). An Egress IP applies to the selected pods'
// addresses of its family: IPv4 traffic leaves with the IPv4 one, IPv6
// traffic with the IPv6 one; a family the Egress has no IP of is left
// alone, so another Egress may take it (the oldest first, per address).
// Every agent's egress plugin then computes the same placement: the
// holder of an Egress is the owner of its first IP's point on a
// consistent hash ring (package placement) of the live nodes that match
// the pool's nodeSelector, and it holds all the Egress's IPs. A node
// joining moves about 1/N of the Egresses.
//
// Liveness comes from hashicorp/memberlist among the plugins (UDP/TCP
// port 7946 on the node IP, `memberlistPort`), not from Lease objects:
// a dead node is detected by its peers directly in about a second (probe
// every 200 ms), without the apiserver in the path and without a lease
// duration to wait out; and a node that cannot reach the others is not
// declared alive by an apiserver it can still reach. Every plugin also
// counts itself alive.
//
// The holder puts an IPv4 Egress IP on a dummy device (sy-egress0, as a
// /32; where the kernel has no dummy devices, as here in the test
// machine's namespaces, on the uplink with the label <uplink>:egr, so the
// node's own addresses are never touched). An IPv6 one goes on the uplink
// (the device that holds the node IP, br-phy on the userspace datapath)
// as a /128 without duplicate address detection and deprecated from the
// start: the kernel answers neighbour solicitations only for addresses of
// the interface they arrive on, a deprecated address is never the source
// of the node's own connections, and that combination (which neither
// SLAAC, DHCPv6 nor an operator makes) is how the plugin knows its own.
// Each new IP is announced three times on the uplink, so the underlay
// moves it at once: a gratuitous ARP for IPv4, an unsolicited neighbour
// advertisement with the override flag for IPv6.
//
// Datapath (package flows, package hostnet):
//   - a selected pod's traffic to outside the cluster (anything but pod
//     CIDRs, node IPs, `serviceCIDRs` and `exceptCIDRs`) is, on its own
//     node, either marked with the plugin's pkt_mark grant (this node holds
//     the IP) or sent into tunnel's port with tun_dst set to the holder;
//   - on the holder, what arrives from the tunnel from a selected pod is
//     marked the same way, leaves OVS through the gateway, and is SNATed
//     to the Egress IP by nftables (table switchyard-egress, srcnat-10,
//     before tunnel's masquerade), matching the mark or, on the userspace
//     datapath where pkt_mark does not cross a tap device, the pod's
//     address;
//   - replies are un-SNATed by conntrack on the holder and reach the pod
//     through the kernel's route to its pod CIDR (tunnel's).
//
// # Shared fields (for netpol and others)
//
//   - pkt_mark grant "egress.snat" (8 bits), exported: a packet carrying a
//     non-zero value there is Egress traffic on the way to its SNAT.
//   - Tunnelled Egress traffic uses tunnel's conventions (RemoteMAC,
//     sdk.pkt_source=3 on arrival), so netpol treats it as any traffic
//     from a peer: the source node applied egress policy.
//   - egress.mark sits after podnet.l3_forward and tunnel.l3_forward in
//     Routing; netpol's tables in EgressSecurity run before it, so a pod's
//     Egress traffic meets the pod's egress policy on its own node. On
//     the holder, tunnelled Egress traffic leaves for the gateway (not a
//     pod port): netpol's ingress tables should let traffic whose
//     destination is the gateway pass, as they do for tunnel's.
//
// Subnet (ExternalIPPool.spec.subnetInfo, checked by the controller: an
// IPv4 gateway, every range inside gateway/prefixLength, the gateway
// outside them, so such a pool is IPv4 only): the SNATed traffic of a
// held IP of such a pool leaves through the subnet's gateway on the uplink, not by
// the node's main routing table (package hostnet, route.go). Each such IP
// gets a routing table, routeTableBase (1100) + its mark ID, holding the
// subnet on the uplink and a default via the gateway, and an ip rule
// (priority 1100) sending packets with the IP's pkt_mark bits there. OVS
// sets those bits on the kernel datapath; for the userspace datapath,
// where they do not reach the kernel, nftables table
// switchyard-egress-route sets the same bits in prerouting (mangle
// priority, before the routing decision) on what enters from the gateway
// device from a selected pod, in a connection's original direction, to a
// destination that is not kept. The Egress IP stays a host address on
// the holder (a prefix there would add a connected route competing with
// the uplink's). The plugin's rules (that priority, a table in its range)
// and the routes in its tables are reconciled at the first sync, so a
// crashed incarnation's leftovers go, and at every sync while an IP is
// routed; the nftables table when it changes; all of it is removed on
// unload. Replies come back to the Egress IP on the uplink and are
// un-SNATed as always; the node's reverse-path filter must let them in
// (off, or loose with a route to the remote in the main table).
//
// Bandwidth: an Egress with spec.bandwidth gets one OVS meter (a drop
// band at the rate, with the burst) on the holder, applied in the marking
// flows of all its pods, local and tunnelled, both families, so the limit
// is for the Egress as a whole.
//
// Not done yet: subnetInfo for IPv6 pools (the controller refuses it, so
// the pool is invalid rather than routed by the main table in silence)
// and a VLAN for a pool's subnet, more than 255
// Egress IPs held by one node (the mark is 8 bits). The nodes talk
// (memberlist, the tunnel) over IPv4.
//
// Config (all optional): device (sy-egress0), gateway (sy-gw0),
// serviceCIDRs, exceptCIDRs, memberlistPort (7946), routeTableBase
// (1100).
package main
