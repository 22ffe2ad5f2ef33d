// Podnet is the plugin that gives pods their network: it holds the CNI
// capability, so the agent host forwards every CNI ADD, DEL and CHECK to
// it. The logic is in package feature; its building blocks are ipam,
// veth and flows.
package main
