// Package tunnel holds the integration tests of the tunnel plugin: three
// (and at runtime four) harness nodes joined to a real apiserver, each with
// its own ovs-vswitchd on the userspace datapath, br-phy holding the node
// IP, the agent running podnet and tunnel, and pods attached by CNI. Real
// packets cross real Geneve (or VXLAN) tunnels; ovs-ofctl dump-flows and
// `ip route` serve as independent witnesses.
//
// Tests need root, OVS and the pinned kube-apiserver (make tools). The
// benchmarks (bench_test.go) compare cross-node with same-node pod traffic
// and with the raw underlay, in one run.
package tunnel
