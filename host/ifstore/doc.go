// Package ifstore is the agent host's record of every pod interface on the
// node: which pod and container it belongs to, its OVS port and OpenFlow
// port number, its IPs and MAC, and its interface names on both ends.
//
// The CNI server writes it (Put after a successful ADD, Delete after DEL);
// plugins learn about changes through Subscribe. The record is persisted to
// one JSON file, rewritten atomically on every change, so an agent restart
// finds every pod again; Reconcile then drops records whose OVS port is gone
// and reports IPAM allocations nobody holds. Start at Open.
package ifstore
