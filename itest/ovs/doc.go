// Package ovs runs a private Open vSwitch instance for a test: its own
// ovsdb-server and ovs-vswitchd (userspace datapath, --disable-system), run
// directory, sockets and logs, optionally inside a network namespace.
//
// The CLI helpers (Vsctl, Ofctl, Appctl) exist for tests to use as
// independent witnesses of what the product programmed; product code never
// calls them.
package ovs
