// Package probe checks reachability from inside one network namespace to an
// address, over TCP, UDP, SCTP or ICMP, and runs the matching servers inside
// pod namespaces from the test process itself, so no helper binary is needed
// and nothing outlives the test.
//
// The kernels the harness runs on may lack the SCTP module, so the SCTP probe
// speaks the first step of the handshake itself over raw sockets: the client
// sends an INIT and the server answers with an INIT-ACK. That is all a
// reachability check (and a policy on SCTP ports) needs.
//
// Matrix runs every (source, destination) pair concurrently and renders an
// N×N table whose diff against the expected table reads at a glance.
package probe
