// Package compute is the policy computation engine of switchyard-controller.
//
// It turns Pods, Namespaces, Kubernetes NetworkPolicies and Switchyard native
// policies (Tier, ClusterNetworkPolicy, NetworkPolicy, ClusterGroup, Group)
// into the internal objects that nodes enforce:
//
//   - groups of pods, keyed by a normalized selector and shared by every policy
//     that uses the same selector. A group used as the subject of a rule is an
//     AppliedToGroup (ATG); used as a peer it is an AddressGroup (AG);
//   - internal Policies whose rules refer to groups by ID.
//
// Each object has a span, the set of nodes that need it: an ATG spans the nodes
// of its pods, a Policy the union of its ATGs, and an AG every node on which
// some rule using it applies. Spans are kept as reference counts so a change
// costs what changed: a pod or namespace label change looks up only the groups
// whose selectors could match (see index.go), and produces member patches.
//
// The engine is pure Go with no I/O. Start with engine.go (the Engine type and
// its input methods), then groups.go (membership and span bookkeeping) and
// policy.go (compiling policies into groups and rules). Nodes that are being
// watched receive Events through a Sink; NodeSnapshot gives the full state a
// new watcher starts from.
package compute
