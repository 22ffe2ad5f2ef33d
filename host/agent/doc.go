// Package agent is switchyard-agent's core: it owns br-int through OVSDB
// and OpenFlow, runs the feature plugins (supervisor.go), arbitrates what
// they submit (apply.go, on top of host/pipeline and host/flowstore), keeps
// every flow so it can replay them when ovs-vswitchd restarts, demuxes
// packet-ins to the owning plugin, and serves the local introspection API
// (api.go).
//
// Plugins are isolated from each other: batches of one plugin run one at
// a time, batches of different plugins run side by side and go out on the
// least busy of several OpenFlow connections (a switch serves each
// connection in order); keys of a batch in flight are reserved so conflict
// checks stay exact. Layout changes (a plugin loading or unloading, a
// sweep, a replay) wait for the batches in flight and land in one bundle.
//
// A plugin incarnation is called only after its Start returned, and is
// first given the pods and nodes the agent knows (events.go). Once every
// plugin synced, whatever no live owner holds is swept (sweep.go).
//
// Where to start: New and Start (agent.go), then Apply (apply.go).
package agent
