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
// Where to start: Store.Plan and Store.Commit.
package flowstore
