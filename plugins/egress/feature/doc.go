// Package feature is the egress plugin: it watches Egresses,
// ExternalIPPools, Pods, Namespaces and Nodes with the host's cluster
// credentials, learns which agents are alive from memberlist, computes a
// Plan (desired.go: pure, unit-tested) and applies what differs to the
// switch (flows), the kernel (the Egress IP device, gratuitous ARP, the
// SNAT table) and the Egress status (egressNode, IPAssigned).
//
// Start with Desired, then Egress.sync.
package feature
