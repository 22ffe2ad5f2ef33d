// Package cluster brings up a multi-node Switchyard test cluster on one
// machine: every node is a network namespace with its own OVS (userspace
// datapath) and br-int, the nodes share an underlay (a Linux bridge in a
// "fabric" namespace), and each node has a Kubernetes Node object with a pod
// CIDR and an InternalIP. Pods are namespaces wired up by real CNI calls
// through libcni, with the harness doing kubelet's part.
//
// Start is the entry point; Options.StartAgent is the hook that starts the
// node agent once the node exists. AddNode adds a node to a running cluster
// (and DeleteNodeObject deletes its Node), AddExternal a host on the
// underlay that is not a node. The node IP starts on the node's eth0; an
// agent configured with an underlay bridge moves it onto br-phy.
package cluster
