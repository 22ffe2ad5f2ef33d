// Package egress is the controller's side of the Egress API: it allocates
// every Egress an IP from its ExternalIPPool (or checks the one it asks
// for), and persists the result in the Egress status, so a restarted
// controller keeps every assignment. Which node holds the IP is the
// agents' business (plugins/egress); they write status.egressNode and the
// IPAssigned condition with their own field manager, so the two writers
// never overwrite each other (server-side apply, conditions keyed by type).
//
// Start with Allocate (allocate.go): a pure function from pools and
// Egresses to each Egress's IP or the reason it has none (pool exhausted,
// IP outside the pool, IP taken by an older Egress, unknown pool). Ranges
// (ranges.go) parses a pool's ipRanges. Controller (controller.go) watches
// both kinds, runs Allocate on every change and writes what differs.
package egress
