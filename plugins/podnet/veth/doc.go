// Package veth creates, checks and removes a pod's veth pair. The pod end
// is created inside the pod's network namespace (with the OS thread locked
// there, via ns.Do) and its peer is placed directly in the plugin's own
// namespace, where it becomes the OVS port. Addresses go on the pod end as
// host routes (/32, /128) with the gateway as the only on-link neighbour,
// so every packet a pod sends is addressed to the gateway MAC and the
// switch routes it.
//
// Start at Setup; Check lists what is missing; Teardown is idempotent.
package veth
