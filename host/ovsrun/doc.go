// Package ovsrun runs Open vSwitch the way the switchyard-ovs DaemonSet
// does: ovsdb-server and ovs-vswitchd as children of one process, with the
// database and the sockets on host paths, so the agent (another pod) finds
// them and an agent upgrade never touches them.
//
// Start creates the database from the schema when it is missing (and
// converts it when a newer OVS brings a newer schema), starts ovsdb-server,
// writes the Open_vSwitch root row and ovs_version through the host's
// libovsdb client (no ovs-vsctl), sets flow-restore-wait when the bridge already exists (the
// agent clears it once its flows are back), starts ovs-vswitchd, and then
// supervises both: if either dies it stops the other and returns an error
// that names it, so the container restarts with a reason in its log.
// ovs-vswitchd runs with jemalloc preloaded unless Options.Malloc says
// system (malloc.go says why); a missing library fails the start.
//
// WaitForDatapath comes first: when the kernel datapath is asked for and the
// kernel has none, it records why in the run dir and waits (no crash loop)
// until it appears. Probe is the container's readiness check: both daemons
// answer a JSON-RPC call on their sockets, or the recorded reason; Alive,
// the liveness, accepts the wait. Uninstall removes what Switchyard left on
// a node.
package ovsrun
