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
// The API also serves /readyz and /livez.
//
// With underlay in its config the agent, when it connects, also makes the
// netdev bridge that holds the node IP (host/underlay), which an overlay
// plugin's tunnel port needs on the userspace datapath.
//
// The agent joins the cluster through host/kube (cluster.go): its own Node
// becomes the node facts plugins get, every other Node a node event, both
// fanned out to the subscribed plugins from one informer (node.go); plugins
// get the apiserver and controller endpoints and the agent's token in their
// Start request. Plugins start once the node facts are known; a CNI ADD
// that comes earlier waits (config readyWait) and then fails with "try
// again later" naming what is missing.
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
// Operability: metrics.go is the Prometheus collector of the agent's
// state (host/metrics holds the event metrics and the endpoint); trace.go
// answers POST /v1/trace by walking the dumped flows (host/traceflow) and
// asking plugins to describe the flows a trace hit; status.go keeps the
// node's NodeAgent object.
//
// Where to start: New and Start (agent.go), then Apply (apply.go).
package agent
