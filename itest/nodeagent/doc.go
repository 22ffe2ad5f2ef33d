// Package nodeagent runs the real switchyard-agent on a harness node: it
// writes the agent's config for the node (its OVS sockets, pod CIDRs and the
// enabled plugins), starts the agent inside the node's namespace, waits
// until the agent answers CNI STATUS, and installs the CNI binary and
// conflist into the node's CNI directories, in that order, as the agent
// DaemonSet's install step does.
package nodeagent
