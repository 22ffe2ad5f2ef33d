// Package kit is the test kit for plugin authors: it starts one real
// Switchyard node for a test and lets the test look at it and send packets
// through it. It works from any module that requires
// switchyard.dev/switchyard (a plugin's own module included), needs root and
// Open vSwitch (Debian openvswitch-switch) like every integration test, and
// removes everything it created on t.Cleanup, also when the test fails.
//
// A node is a network namespace with its own ovsdb-server and ovs-vswitchd
// (userspace datapath), the real switchyard-agent built from
// switchyard.dev/switchyard/host/cmd/switchyard-agent, and the plugins under
// test, each with its own config section and arguments. With WithPodnet the
// in-tree podnet plugin wires pods, and AddPod attaches a pod namespace by
// real CNI (switchyard-cni, through libcni, as a container runtime would).
//
//	func TestBlocks(t *testing.T) {
//		n := kit.StartNode(t, kit.Options{WithPodnet: true, Plugins: []kit.Plugin{{
//			Name:    "template",
//			Package: "example.com/switchyard-template", // or Binary: "/path/to/plugin"
//			Config:  map[string]any{"blockTCPPorts": []int{2323}},
//		}}})
//		n.WaitSynced()
//		a, b := n.AddPod("a"), n.AddPod("b")
//		if got := n.Probe(a, b, kit.TCP, 2323); got != kit.Timeout {
//			t.Errorf("TCP to 2323: %s, want %s", got, kit.Timeout)
//		}
//		t.Log(n.Flows("template", "template.block"))
//	}
//
// Start with StartNode and Options; Node has WaitSynced, Status, Flows (the
// agent's own record, canonical ovs-ofctl text) and SwitchFlows (what
// ovs-ofctl dump-flows reads from the switch: the independent witness),
// AddPod and Probe. The kit is assembled from the harness packages beside
// it (cluster, nodeagent, ovs, probe, build, testenv); kit_test.go checks
// its errors and its cleanup, and plugins/template's module tests itself
// through it.
package kit
