// Tunnel is the plugin that joins the nodes' pod networks, as Antrea's
// encap mode does. It owns a flow-based tunnel port on br-int (Geneve by
// default, VXLAN with `type: vxlan`; remote_ip=flow, key=flow) and, for
// every other node the host reports in node events:
//
//   - a route in tunnel.l3_forward for each of the node's pod CIDRs (IPv4
//     and IPv6 alike, always over the node's IPv4 underlay address), with
//     tun_dst set to the node's IP;
//   - an ARP answer for the node's IPv4 gateway (in podnet.arp_forward),
//     and, in the node's namespace, a route to each pod CIDR through that
//     gateway on the gateway device (IPv6: with a permanent neighbour
//     entry), so the node reaches remote pods;
//
// and, once, the classification of what arrives from the tunnel (in
// podnet.classifier) and the switching of RemoteMAC to the tunnel port (in
// podnet.l2_forward). See package flows for the path of a packet.
//
// On a node update only the flows, routes and rules that differ change; on
// a node delete every flow of that node goes in one batch (one bundle).
//
// MTU: the plugin declares its encapsulation overhead (50 bytes for Geneve
// and VXLAN, 20 more with `ipv6Underlay: true`); the host lowers the pod MTU
// and podnet takes it from the host. The plugin never sets an MTU itself.
//
// Outside the cluster: pod traffic that leaves the node through any device
// but the gateway is masqueraded to the node's address with nftables
// (package hostnet), except traffic to any pod CIDR or node IP of the
// cluster. `masquerade: false` turns it off.
//
// On the userspace datapath the node IP must sit on a netdev bridge for the
// tunnel to work: the agent sets that up when its config has
// `underlay: {bridge: br-phy, interface: eth0}` (host/underlay).
//
// # Shared fields for policy placement (for netpol)
//
// Egress policy is enforced at the source node, ingress policy at the
// destination node. What tells them apart uses well-known fields only, so
// netpol needs nothing allocated by tunnel:
//
//   - Arriving from a peer: sdk.pkt_source == flow.PacketSourceTunnel (3),
//     set by tunnel's classifier flow. The packet then skips Validation (it
//     comes from no local port) and enters the IP pipeline at
//     ConntrackState, so it meets every table from there on: netpol's
//     ingress tables see it; egress tables should let it pass (the source
//     node applied egress).
//   - The tunnel port is exported (PortRequest.Exported): another feature
//     may output to it after setting tun_dst itself.
//   - Leaving for a peer: after Switching, sdk.target_ofport holds the
//     tunnel port's number (Host.Port("sy-tun0"), or the configured `port`)
//     and eth_dst is flows.RemoteMAC (0a:58:ff:ff:ff:fe). netpol's
//     IngressSecurity tables should let such packets pass: the destination
//     node applies ingress.
//
// Config (the plugin's section of the agent config, all optional): type
// (geneve|vxlan), port (sy-tun0), gateway (sy-gw0, podnet's), stateDir,
// masquerade (true), ipv6Underlay (false).
package main
