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
// A restarted plugin re-submits all its flows; those the switch already
// holds unchanged are not sent again (flowstore.Change.Refresh) and keep
// the cookie of the round that installed them. Synced then deletes what
// the new round did not submit: by key for rounds this process registered
// (the store saw every flow of them), by cookie for rounds of an earlier
// agent process. A restart of a plugin holding 100,000 unchanged flows
// thus costs the switch nothing. Flows the switch learned from a
// plugin's learn action are in no round (pipeline.LearnedRound): no sweep
// deletes them while the plugin is loaded (learned.go, sparedBySweep, the
// rule any new sweep must keep).
//
// Where to start: New and Run (agent.go), then Apply (apply.go).
package agent
