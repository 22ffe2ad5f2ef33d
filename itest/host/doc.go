// Package host holds the plugin host's integration tests: a real
// ovs-vswitchd (userspace datapath), the real switchyard-agent binary and
// real plugin processes (plugins/testplugins, plugins/template), with pods
// as network namespaces on veths. Tests need root; they clean up every
// process, namespace and directory they create, also on failure.
//
// Where to start: harness_test.go (setup, agent, API, ping), then
// lifecycle_test.go.
package host
