// Package unixctl is a client for the control sockets of Open vSwitch
// daemons (what ovs-appctl speaks): JSON-RPC 1.0 over a unix socket, one
// command per request, its arguments strings, its answer a string.
//
// The product never runs ovs-appctl; where it needs a daemon command that
// OVSDB and OpenFlow do not offer (ovs-vswitchd's tunnel routes, in
// host/underlay) it calls it through this package.
//
// Where to start: Find locates a daemon's socket in its run directory,
// Dial opens it, Client.Call runs one command.
package unixctl
