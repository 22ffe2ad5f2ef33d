// Package agent is switchyard-agent's core: it owns br-int through OVSDB
// and OpenFlow, runs the feature plugins (supervisor.go), arbitrates what
// they submit (apply.go, on top of host/pipeline and host/flowstore), keeps
// every flow so it can replay them when ovs-vswitchd restarts, demuxes
// packet-ins to the owning plugin, and serves the local introspection API
// with /readyz and /livez (api.go).
//
// The agent joins the cluster through host/kube (cluster.go): its own Node
// becomes the node facts plugins get, every other Node a node event, both
// fanned out to the subscribed plugins from one informer (node.go); plugins
// get the apiserver and controller endpoints and the agent's token in their
// Start request. Plugins start once the node facts are known; a CNI ADD
// that comes earlier waits (config readyWait) and then fails with "try
// again later" naming what is missing.
//
// Where to start: New and Run (agent.go), then Apply (apply.go).
package agent
