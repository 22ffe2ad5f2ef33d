// Package flows computes netpol's OpenFlow pipeline from a node's policy
// span: the tables netpol declares and, for a span (controller/client.State),
// the complete set of flows that enforce it. It is pure (no I/O): the plugin
// computes the wanted set after every change and submits only the
// difference to what the switch holds, in one batch, so a resync that
// changes nothing rewrites no flow. The exact flow sets are unit-tested
// against golden lists.
//
// The path of an IP packet through netpol's tables (stage order):
//
//	ConntrackState   netpol.ct_state          ct(zone=Z) and recirculate (not SCTP)
//	PreRouting       netpol.reject_resume     where reject replies enter; SCTP looks up
//	                                          netpol.sctp_replies (learned, see below)
//	EgressSecurity   netpol.egress_native     replies of tracked connections pass;
//	                                          native tiers before the Kubernetes one
//	                                          (Allow skips the rest of egress, Drop
//	                                          drops, Reject punts, Pass goes on)
//	                 netpol.egress_rules      Kubernetes allow rules (conjunctions)
//	                 netpol.egress_isolation  pods a Kubernetes policy isolates: drop
//	                 netpol.egress_baseline   native baseline tier
//	IngressSecurity  netpol.ingress_*         the same four for the destination;
//	                                          the node's own traffic to its pods passes
//	Conntrack        netpol.ct_commit         commit new connections that got here
//
// Pods are matched by IP, not by OpenFlow port: podnet's spoof guard ties a
// pod's source address to its port before any security stage, and a local
// destination address decides the output port. So the flows depend on the
// span alone (no pod interface events, nothing to wait for after a
// restart), and a restarted plugin computes exactly the flows the switch
// already holds. Egress rules are enforced where the source pod runs (its
// address is the source), ingress rules where the destination runs; the
// controller sends each node applied-to groups holding its own pods only.
//
// Conjunctive match: a rule becomes one conjunction of up to three clauses
// (source addresses, destination addresses, protocol and port), so a rule
// with N peers, M local pods and K ports costs N+M+K+1 flows. Clause flows
// that several rules share are one flow carrying every rule's conjunction
// action. A clause with a single dimension (any peer, any port) is written
// as plain flows. Port ranges (endPort) become value/mask matches. A named
// port is resolved per destination pod (ingress: the applied-to pod,
// egress: the peer pod); destination pods that resolve it to the same
// ports share one conjunction. ipBlock except is subtracted from the CIDR
// into the prefixes that remain.
//
// Native rules get one priority each, counting down from 60000 in
// evaluation order (tier, policy priority, rule order); Kubernetes rules
// only allow, so they share priorities (in groups of 1000 conjunctions, so
// a clause many rules share fits one OpenFlow message). Priorities are
// recomputed with the rest: when an insertion shifts them, the plugin's
// diff rewrites the affected flows in the same bundle as the change.
//
// Statefulness: every packet of the original direction is evaluated
// against the current rules, and only replies (ct_state +est+rpl) and
// related packets skip them. So an established connection survives a
// policy change that still allows it, and one the change denies is cut at
// its next packet in the original direction. Antrea instead lets
// established connections pass and so keeps denied ones alive until they
// end; the Kubernetes API says nothing, and we chose the behaviour that
// makes a deny take effect at once. The cost is a lookup per packet, which
// the datapath's flow cache absorbs.
//
// Epoch: the conntrack lookup also loads a 16-bit epoch that the plugin
// moves with every rule change, in the same bundle. Packets then resume
// after the lookup in a context no cached datapath flow knows, so the
// switch decides them afresh from the new rules instead of trusting the
// revalidation of its cached flows, which Open vSwitch's userspace
// datapath before 3.1.3 can get wrong (see Epoch).
//
// SCTP: the userspace datapath's conntrack keys SCTP by addresses alone,
// so SCTP is not tracked; an allowed SCTP packet learns a flow (idle
// timeout 60 s) that lets the packets of the opposite direction, with
// addresses and ports swapped, pass as replies.
//
// Where to start: Compute (compute.go). To add a table: declare it in
// Tables in stage order, give its flows in Compute, extend the golden
// lists in flows_test.go.
package flows
