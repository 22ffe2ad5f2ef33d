// Package agent is switchyard-agent's core: it owns br-int through OVSDB
// and OpenFlow, runs the feature plugins (supervisor.go), arbitrates what
// they submit (apply.go, on top of host/pipeline and host/flowstore), keeps
// every flow so it can replay them when ovs-vswitchd restarts, demuxes
// packet-ins to the owning plugin, and serves the local introspection API
// (api.go). readback.go answers a plugin's read-back (its flows, groups
// and meters as the switch holds them, by its cookie prefix only), expands
// its delete-by-tag into strict deletes inside the batch's bundle, fills
// packet-in registers and ct state, and forgets flows the switch times out
// (FLOW_REMOVED), telling the owner if it asked.
//
// Where to start: New and Run (agent.go), then Apply (apply.go).
package agent
