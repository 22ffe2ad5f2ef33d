// Package thin is the whole of the switchyard-cni binary apart from main:
// it turns one skel invocation into one gRPC call to the agent host and the
// answer back into CNI output. It deliberately does no network work, so the
// binary never needs upgrading when networking changes.
//
// Start at Plugin. errors.go maps every failure (agent not running, agent
// not ready, bad config, plugin errors) to a CNI error with a code and a
// message a person can act on; result.go converts the agent's answer to the
// cniVersion the runtime asked for.
package thin
