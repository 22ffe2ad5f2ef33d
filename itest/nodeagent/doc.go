// Package nodeagent runs the real switchyard-agent on a harness node: it
// writes the agent's config for the node (its OVS sockets and the enabled
// plugins), starts the agent inside the node's namespace, waits until the
// agent answers CNI STATUS, and installs the CNI binary and conflist into
// the node's CNI directories, in that order, as the agent DaemonSet's
// install step does.
//
// With a control plane (Options.ControlPlane) the agent holds what a
// DaemonSet pod would: the RBAC of manifests/rbac.yaml, a Pod object on its
// node, a ServiceAccount token bound to that Pod (TokenRequest) and a
// kubeconfig naming the apiserver as forwarded into the node. Its config
// then has no pod CIDRs or node IPs: it learns them from its Node. Without
// one (suites that run no apiserver) the node's pod CIDRs and IP are
// written into the config as explicit overrides. With the tunnel plugin
// enabled the config also names the underlay bridge (br-phy over eth0), so
// the agent moves the node IP there, as a userspace tunnel needs.
package nodeagent
