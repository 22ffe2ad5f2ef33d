// Package testplugins holds the plugins the host's integration tests run
// as real processes (itest/host). They are small but real: alpha wires
// ports and forwards between them (classifier, ARP, L2, output), beta adds
// a spoof guard and an ingress table, and tries to break the rules so the
// tests can see the host refuse it. gamma forwards between two ports
// through a register field, a group and a meter, and lets the test drive
// its read-back (Host.Flows, GroupStats, MeterStats), delete-by-tag,
// packet-in metadata, packet-out resume and flow-removed over a control
// socket.
package testplugins
