// Package realnode runs real Kubernetes nodes in the harness: a control
// plane of etcd, kube-apiserver, kube-scheduler and kube-controller-manager
// (node CIDR allocation, service-account tokens, EndpointSlices, DaemonSets
// and Deployments all run for real), and per node a containerd v2 and a
// kubelet v1.37.2 that register themselves, pull nothing (images are
// imported from local archives) and call whatever CNI the node's CNI
// directories hold.
//
// Start is the entry point. Each node is
//   - a network namespace on a shared underlay bridge (the "fabric"
//     namespace), where the apiserver is forwarded to APIAddress, so
//     kubelets and pods reach it the way they would on a real network;
//   - a mount namespace of its own (slave of the host's, so host mounts
//     still show), in which node-private directories are bind-mounted over
//     the fixed host paths a CNI and its DaemonSets use (/opt/cni/bin,
//     /etc/cni/net.d, /var/lib/cni, /run/netns, /var/run/openvswitch,
//     /var/lib/kubelet, ...). containerd and kubelet are started inside it
//     with nsenter, and their containers inherit it, so a hostPath volume
//     resolves per node although both nodes share one filesystem. Those
//     mounts never show on the host and vanish with the namespace;
//   - a cgroup root of its own in every hierarchy (kubelets sharing one
//     would remove each other's pods).
//
// Teardown kills everything in a node's cgroups and mount namespace,
// releases the namespace and removes the cgroups, directories and network
// namespaces; `make clean-itest` does the same for a crashed run.
package realnode
