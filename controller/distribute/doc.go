// Package distribute streams the computed policy state to nodes.
//
// Hub (hub.go) is the compute.Sink: it keeps, per watched node, a bounded log
// of versioned events. A node's Watch stream (server.go) sends a snapshot of
// the node's span, a Synced marker, then the node's log from the snapshot's
// version on. A reconnecting node resumes from its last version while the
// log still holds it; a node that falls further behind than the log holds is
// sent a fresh snapshot, so a slow node never blocks the engine or other
// nodes.
//
// Every RPC is authenticated (auth.go): the bearer token must be a pod-bound
// ServiceAccount token that TokenReview accepts, and the node name it carries
// must be the node being watched. Realization reports are kept in
// Realization (realization.go) for the controller's status writer.
package distribute
