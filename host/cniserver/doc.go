// Package cniserver is the agent host's end of the CNI path: a gRPC server
// on a unix socket that the thin switchyard-cni binary calls once per CNI
// command.
//
// For every request it validates the input, takes a per-container lock
// (bounded wait, so a stuck call cannot wedge kubelet forever), dispatches
// to the plugin holding the CNI capability (through a Resolver, so the
// server can start before that plugin), rolls back on failure, and records
// the result in the interface store. DEL is idempotent: an unknown
// container or a vanished netns is success.
//
// Start at New and Server.Serve; server.go holds the command handlers,
// errors.go the mapping of failures to CNI codes.
package cniserver
