// Package feature is the netpol plugin: it follows the controller's policy
// stream for its node (controller/client), keeps the span in memory and on
// disk, and enforces it with the flows package computes.
//
// Every change (a snapshot, a patch) recomputes the node's flow set and
// submits only the difference to what the switch holds, as one batch (one
// OpenFlow bundle): no packet sees half a policy, and a resync that changes
// nothing sends nothing. After each applied change the span is saved
// (client.State.Save); a restarted plugin loads it, installs the same flows
// (the host keeps unchanged flows as they are), reports synced, and only
// then talks to the controller: enforcement holds across a plugin restart
// with the controller down. Realized policy generations go back to the
// controller (Client.Report).
//
// Reject and logging: a rule's flow punts the packet (metered packet-in);
// PacketIn writes one JSON line per logged packet to the decision log and,
// for Reject, answers as the server would (TCP RST, else ICMP
// administratively prohibited), injected into netpol's PreRouting table
// with the bypass bit so the node routes it back to the client.
//
// Events from the stream only wake a worker (kickWorker); the worker
// computes and applies the client's current span, so a burst of events
// costs a few rounds. A round recomputes the whole span (10,000 rules take
// about 0.3 s on the test machine) and sends only the difference; a
// difference larger than the host's batch limit goes in several batches,
// additions first.
//
// Limits today: Reject answers IPv4 only (an IPv6 packet a Reject rule
// matches is dropped); the decision log is not rotated.
//
// Where to start: Start (netpol.go), then flows.Compute.
package feature
