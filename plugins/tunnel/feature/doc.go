// Package feature is the tunnel plugin's logic: it turns node events into
// flows (package flows), routes and masquerade rules (package hostnet),
// keeping only the difference on each change.
//
// Where to start: Tunnel.Start, then Tunnel.NodeEvent. The peers it has
// installed are recorded in a small state file, so a restarted incarnation
// re-installs exactly those before it says Synced: the host's sweep of the
// old incarnation's flows then removes nothing a live connection uses.
package feature
