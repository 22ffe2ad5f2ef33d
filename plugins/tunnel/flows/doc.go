// Package flows computes the tunnel plugin's OpenFlow flows: pure functions
// of the tunnel port, the local gateway and the peer nodes, so the exact
// flow set is unit-tested and the same functions give what to add on a
// node event, what to delete, and what a restarted plugin re-installs.
//
// How a packet crosses nodes (podnet's tables named for where they sit):
//
//	source node
//	  root Classifier   podnet.classifier   pod → source local; gateway → source gateway (podnet)
//	  ip   Routing      podnet.l3_forward   local pod IPs (podnet); miss → next
//	  ip   Routing      tunnel.l3_forward   nw_dst in a peer's pod CIDR: eth_src=gateway MAC,
//	                                        eth_dst=RemoteMAC, tun_dst=peer IP, dec_ttl
//	  ip   Switching    podnet.l2_forward   eth_dst=RemoteMAC → target port = tunnel port (ours, in
//	                                        podnet's exported table)
//	  ip   Output       podnet.output       output to the target port: encapsulated to the peer
//	destination node
//	  root Classifier   podnet.classifier   in_port=tunnel → source tunnel, eth_dst=gateway MAC (ours,
//	                                        in podnet's exported table); skips the spoof guards, which
//	                                        hold local ports only
//	  ip   Routing      podnet.l3_forward   the pod's delivery flow, as for same-node traffic
//
// The node reaches a peer's pods through a route via the peer's gateway IP
// on the gateway device (package hostnet); the kernel resolves that
// next hop with ARP, and tunnel's responder in podnet.arp_forward (exported)
// answers for every peer gateway with RemoteMAC, so the packet enters br-int
// from the gateway and takes the same Routing flows.
//
// Flows of one peer carry the peer's tag (PeerTag), so dump-flows shows
// which node a flow belongs to; deleting a peer deletes exactly the flows
// PeerFlows gave for it, in one batch.
//
// To add a flow kind: add it to StaticFlows or PeerFlows and extend the
// golden lists in flows_test.go.
package flows
