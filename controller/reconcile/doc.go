// Package reconcile wires the computation engine to the apiserver.
//
// Pods, Namespaces and Kubernetes NetworkPolicies, the bulk of a cluster,
// go from their informers' event handlers straight into compute.Engine
// (direct.go): the handler already holds the object as the cache has it,
// none of these can fail in a way a retry would fix, and the engine
// serializes every input on one lock. The Pod cache keeps a converted, small
// form of each pod. The native kinds (Tier, ClusterNetworkPolicy,
// NetworkPolicy, ClusterGroup, Group) follow kubernetes/sample-controller:
// a rate-limited workqueue of object keys and a level-based sync handler
// that reads the object from its lister and hands it to the engine (or
// deletes it there when it is gone).
//
// Ready (controller.go) closes when every informer's initial list reached
// its handler and the queue is then empty with no key in a worker's hands,
// counted exactly from the queue's own hooks (backlog.go); nodes are served
// only after it.
//
// It also creates the built-in Tiers at start and runs the status writer
// (status.go), which writes phase, observedGeneration, realized N of M and
// the Valid condition onto native policies.
//
// Start with Controller in controller.go.
package reconcile
