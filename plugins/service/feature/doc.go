// Package feature is the service plugin: it watches Services and
// EndpointSlices (one informer per kind) with the credentials the host
// hands over, and keeps, per Service port, a select group and its flows
// (package flows) in br-int. Each Service is synced on its own through a
// rate-limited work queue: an endpoint change rewrites only that
// Service's group and flows (a diff against what was installed). A new
// connection to a port without endpoints is answered through a packet-in
// (package reject). When a UDP endpoint leaves a Service port, the
// conntrack entries of that port towards it are flushed (through the
// host's sdk.ConntrackFlusher), so a client keeping its socket moves on.
//
// Besides the ClusterIP, a Service port may get a NodePort (through the
// kernel's NodePort table, package hostnet) and a port per external or
// load-balancer IP (a host route into br-int), each with its own group,
// balanced by the traffic policies; sessionAffinity ClientIP adds learned
// flows (package flows).
//
// Start installs the node-wide flows and the node's route to the Service
// CIDRs, and returns; a goroutine waits for the informers, installs every
// Service, and only then says Synced, so a restarted plugin never leaves
// a gap: the previous incarnation's flows stay until then.
package feature
