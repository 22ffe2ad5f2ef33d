// Package testplugins holds the plugins the integration tests run as real
// processes (itest/host, itest/nodeagent). They are small but real: alpha
// wires ports and forwards between them (classifier, ARP, L2, output), beta
// adds a spoof guard and an ingress table, and tries to break the rules so
// the tests can see the host refuse it. gamma forwards between two ports
// through a register field, a group and a meter, and lets the test drive
// its read-back (Host.Flows, GroupStats, MeterStats), delete-by-tag,
// packet-in metadata, packet-out resume and flow-removed over a control
// socket. observer records the node events and node facts changes the host
// sends, may declare an encapsulation overhead, and reads its Node from the
// apiserver with the credentials the host hands plugins.
package testplugins
