// Package feature is the podnet plugin: it holds the CNI capability, so
// every pod ADD, DEL and CHECK on the node ends up here. It combines the
// building blocks — ipam (addresses), veth (the pod interface), flows (the
// pipeline) — with the host's port and flow API, undoing every completed
// step when a later one fails.
//
// CHECK verifies the pod interface (MAC, MTU, state, addresses, routes),
// the host end, the OVS port and its ofport, and the IPAM allocation,
// validates the pod's computed flows, and reads the pod's flows back from
// the switch (Host.Flows, by the pod's tag) to confirm each one is really
// installed with the actions podnet computed; a missing one is named.
//
// Its own record of attached pods (state.go) is persisted, so after a
// restart it re-submits every pod's flows before telling the host it is
// synced, and pods keep their connectivity. Start at Podnet.Start and
// Podnet.CNIAdd.
package feature
