// Package flowstore is the host's memory of every flow, group and meter it
// installed, keyed by owner. It decides conflicts (two plugins on one
// (table, priority, match) key), enforces per-plugin flow limits, computes
// what a batch changes before it is sent, and hands out everything for a
// replay after ovs-vswitchd restarts. It is pure data; the host applies a
// Plan to the switch and calls Commit only when the switch accepted it.
//
// Tagged (tagged.go) finds an owner's flows by cookie tag for a
// delete-by-tag.
//
// A flow is kept in compact form (its SDK wire bytes and the few resolved
// facts not in them, about 220 bytes in all for a typical flow) under one
// key index; the full Entry is rebuilt only when asked for. The agent holds
// 100,000 flows in about 21 MiB of heap (BenchmarkHeld100k in host/agent).
//
// A flow re-submitted unchanged by a plugin's next round is a refresh: Plan
// marks it, the host sends nothing, and the store only notes the round (see
// Change.Refresh and KnownRound).
//
// Where to start: Store.Plan and Store.Commit.
package flowstore
