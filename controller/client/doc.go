// Package client is the node side of the controller's policy distribution
// API: it keeps one node's span of policies and groups in memory, the way
// the controller streams it, and hands each change to the caller.
//
// The stream protocol (controller/api/v1/distribution.proto) is a Reset, the
// span as upserts, a Synced marker, then incremental events, each stamped
// with the stream's epoch and a per-node version. This package owns every
// rule of that protocol so its users (the netpol plugin, the demo, the
// tests) never re-implement it:
//
//   - A snapshot is buffered until its Synced marker and then handed over
//     whole (Handler.Replace), so the caller can diff it against what it
//     already enforces and rewrite nothing that did not change.
//   - After a broken stream the client reconnects with backoff and asks to
//     resume from the last epoch and version it applied; the controller
//     answers Resumed plus the missed events, or a fresh Reset snapshot.
//   - Until a Reset's snapshot is complete, the previous state stays
//     current, so a consumer never sees (or enforces) a half snapshot.
//   - The state can be saved to and loaded from a file (Save, Load), so a
//     restarted consumer enforces the last known policies while the
//     controller is unreachable, and can resume instead of resnapshotting.
//
// Where to start: Client (client.go) and Handler; State (state.go).
package client
