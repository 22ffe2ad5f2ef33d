// Package itest is the home of Switchyard's real test environment.
//
// Nothing here is faked: the subpackages start real ovsdb-server and
// ovs-vswitchd processes (userspace datapath), real network namespaces for
// nodes and pods, and a real etcd and kube-apiserver built from the Go module
// proxy (see tools/). Integration suites live in subfolders beside the harness.
//
// Where to start:
//   - testenv: the T interface, run-unique names, process supervision, cleanup.
//   - netns: named network namespaces.
//   - ovs: a private OVS instance (optionally inside a namespace).
//   - controlplane: etcd + kube-apiserver with token auth and RBAC.
//   - cluster: N nodes on an underlay fabric, each with its own OVS, plus Node objects.
//   - probe: TCP/UDP/SCTP/ICMP reachability and the N×N connectivity matrix.
//   - nodeagent: the real switchyard-agent on a harness node.
//   - kit: the test kit for plugin authors (one node, their plugins, pods,
//     probes, flows), importable from a plugin's own module.
//   - netpolmodel: the Kubernetes e2e NetworkPolicy model (x, y, z × a, b, c)
//     with the controller, podnet, tunnel and netpol, truth tables and probes.
//
// Every resource a harness creates is named with the run prefix (see
// testenv.Prefix) so that `make clean-itest` can find leftovers of a crashed run.
package itest
