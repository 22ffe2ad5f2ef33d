// Package flows computes podnet's OpenFlow pipeline: the tables it declares
// and, for the gateway and each pod, the flows that attach them. It is pure
// (no I/O), so the exact flow set is unit-tested and the same functions
// produce the flows to add on ADD, to delete on DEL and to expect on CHECK.
//
// The path of a packet (tables in stage order):
//
//	root  Classifier     podnet.classifier    gateway port → source gateway; anything else → source
//	                                          local pod; ARP → arp pipeline, IP → ip pipeline
//	arp   Validation     podnet.arp_guard     pod may only claim its own IP and MAC; gateway trusted
//	arp   Output         podnet.arp_forward   a pod's request for the gateway is answered here (ARP
//	                                          responder); other ARP from pods goes to the gateway,
//	                                          ARP from the gateway is flooded (NORMAL)
//	ip    Validation     podnet.ip_guard      pod may only send from its own IP and MAC
//	ip    Routing        podnet.l3_forward    to the gateway MAC, for a local pod IP: rewrite MACs, dec_ttl
//	ip    Switching      podnet.l2_forward    destination MAC → target port register
//	ip    Output         podnet.output        output to the target port
//
// A pod costs as few flows as in Antrea: 5 for IPv4 (ARP and IP spoof
// guards, the ARP responder, L3 and L2 delivery) and 3 more for IPv6 (a
// guard for its address, one for link-local neighbour discovery, L3
// delivery). Classification and ARP/ND delivery are node-wide flows: a port
// no flow classifies counts as a local pod and meets a pod's spoof guard,
// which nothing but that pod passes; the gateway's ARP requests and
// neighbour solicitations reach every pod and only the owner of the address
// answers; a pod's own ARP traffic other than its request for the gateway
// (gratuitous ARP, replies) goes to the gateway.
//
// The gateway's ARP responder is one flow per pod: it matches the pod's
// request for the gateway IP and rewrites it in place into the reply (the
// pod's MAC and IP are known, so every field is a constant set_field) and
// sends it back out of in_port. It needs no controller round trip and keeps
// answering while podnet restarts, since the flows stay on the switch. ARP
// for the gateway IP from anywhere else still reaches the gateway port,
// where the node's kernel owns the address.
//
// Pods get their addresses as host routes with the gateway as the only
// on-link neighbour, so every IP packet from a pod is sent to the gateway
// MAC and pod-to-pod traffic goes through l3_forward.
//
// To add a flow kind: add it to PodFlows or GatewayFlows (both ADD and DEL
// use them), then extend the golden list in flows_test.go.
package flows
