// Package cluster brings up a multi-node Switchyard test cluster on one
// machine: every node is a network namespace with its own OVS (userspace
// datapath) and br-int, the nodes share an underlay (a Linux bridge in a
// "fabric" namespace), and each node has a Kubernetes Node object with a pod
// CIDR and an InternalIP. Pods are namespaces wired up by real CNI calls
// through libcni, with the harness doing kubelet's part.
//
// Start is the entry point; Options.StartAgent is the hook that starts the
// node agent once the node exists.
package cluster
