// Package feature is the podnet plugin: it holds the CNI capability, so
// every pod ADD, DEL and CHECK on the node ends up here. It combines the
// building blocks — ipam (addresses), veth (the pod interface), flows (the
// pipeline) — with the host's port and flow API.
//
// CHECK verifies the pod interface (MAC, MTU, state, addresses, routes),
// the host end, the OVS port and its ofport, and the IPAM allocation,
// validates the pod's computed flows, and reads the pod's flows back from
// the switch (Host.Flows, by the pod's tag) to confirm each one is really
// installed with the actions podnet computed; a missing one is named.
//
// Podnet keeps no record of the pods it attached: the host's is the one
// record (sdk.CNIHandler). What podnet needs of an attachment it derives
// from what holds it: the addresses from IPAM (keyed by the attachment),
// the host interface's name and the MAC from those, the ofport from OVS.
// After a restart it re-submits the flows of every pod the host recorded
// (StartRequest.Attachments) before telling the host it is synced, so pods
// keep their connectivity, and removes what an ADD cut short left behind.
// Start at Podnet.Start and Podnet.CNIAdd.
package feature
