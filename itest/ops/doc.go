// Package ops holds the operability integration tests: the agent's
// Prometheus metrics scraped and parsed as Prometheus would, yardctl run
// as a binary against live agents (golden output, -o json), and packet
// traces on one node and across the Geneve tunnel, including a drop that
// names the plugin, table and rule. The cluster is real: apiserver,
// two nodes with their own OVS, podnet, tunnel and the warden test plugin
// (plugins/testplugins/warden) standing in for a policy plugin.
package ops
