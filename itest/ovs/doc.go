// Package ovs runs a private Open vSwitch instance for a test: its own
// ovsdb-server and ovs-vswitchd (userspace datapath, --disable-system), run
// directory, sockets and logs, optionally inside a network namespace.
//
// The CLI helpers (Vsctl, Ofctl, Appctl) exist for tests to use as
// independent witnesses of what the product programmed; product code never
// calls them.
//
// datapath_test.go checks the userspace datapath as the agent configures it
// (userspace TSO on, pods' checksum offload on): TCP and UDP checksums stay
// right (TestUserspaceTSOKeepsChecksums), and BenchmarkPodToPod measures
// pod-to-pod TCP throughput, retransmits and connection rate against a Linux
// bridge in the same run.
package ovs
