package compute

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// Pod is the part of a Kubernetes Pod the engine needs.
type Pod struct {
	Namespace string
	Name      string
	Node      string
	IPs       []netip.Addr
	Labels    map[string]string
	Ports     []NamedPort
}

// NamedPort is a named container port, used to resolve named ports in rules.
type NamedPort struct {
	Name     string
	Protocol corev1.Protocol
	Port     int32
}

// Direction of a rule.
type Direction uint8

// The rule directions.
const (
	Ingress Direction = iota
	Egress
)

func (d Direction) String() string {
	if d == Egress {
		return "Egress"
	}
	return "Ingress"
}

// Action of a rule. Kubernetes NetworkPolicy rules are always Allow.
type Action uint8

// The rule actions.
const (
	Allow Action = iota
	Drop
	Reject
	Pass
)

func (a Action) String() string {
	return [...]string{"Allow", "Drop", "Reject", "Pass"}[a]
}

// SourceKind says which API a Policy was computed from.
type SourceKind uint8

// The policy sources.
const (
	KubernetesNetworkPolicy SourceKind = iota
	NativeClusterNetworkPolicy
	NativeNetworkPolicy
)

func (k SourceKind) String() string {
	return [...]string{"K8sNetworkPolicy", "ClusterNetworkPolicy", "NetworkPolicy"}[k]
}

// KubernetesTierPriority places Kubernetes NetworkPolicies between the
// Application and Baseline tiers, as Antrea does, so the agent can order them
// among native policies.
const KubernetesTierPriority = 251

// GroupID names a group on the wire. IDs are never reused within one engine.
type GroupID uint32

// Policy is an internal policy as nodes receive it. A Policy value is
// immutable once published; an update publishes a new value.
type Policy struct {
	UID        string // "<kind>:<namespace>/<name>" or "<kind>:<name>"
	Source     SourceKind
	Namespace  string
	Name       string
	Generation int64
	// TierPriority, Priority and each rule's Priority order native policies:
	// lower numbers first.
	TierPriority int32
	Priority     int32
	// IsolateIngress / IsolateEgress: the policy isolates the selected pods in
	// that direction (Kubernetes policyTypes), so traffic not allowed by some
	// rule is dropped.
	IsolateIngress  bool
	IsolateEgress   bool
	AppliedToGroups []GroupID
	Rules           []Rule
}

// Rule is one computed rule.
type Rule struct {
	Name      string
	Direction Direction
	Action    Action
	Priority  int32 // position within the policy's rules of this direction
	// Peers: AddressGroups and IP blocks. AnyPeer means the rule matches every
	// peer (a rule without from/to).
	AnyPeer       bool
	AddressGroups []GroupID
	IPBlocks      []IPBlock
	// Ports: empty means every port and protocol.
	Ports []Port
	// AppliedToGroups of this rule: the policy's, or the rule's own.
	AppliedToGroups []GroupID
	Logging         bool
}

// IPBlock is a parsed CIDR with exceptions.
type IPBlock struct {
	CIDR   netip.Prefix
	Except []netip.Prefix
}

// Port matches a protocol and a port, a port range, or a named container port.
// Port 0 with an empty Name matches every port of Protocol. A named port is
// resolved per pod against its container ports (Member.Ports): for ingress
// rules against the AppliedTo pods, for egress against the peer pods; see
// ResolvePort.
type Port struct {
	Protocol corev1.Protocol
	Port     int32
	EndPort  int32 // 0: single port
	Name     string
}

// ResolvePort returns the port range a rule port means for a pod with the
// given container ports. ok is false when a named port does not exist on the
// pod, in which case the rule port matches nothing for that pod.
func ResolvePort(p Port, podPorts []NamedPort) (start, end int32, ok bool) {
	if p.Name == "" {
		end = p.EndPort
		if end == 0 {
			end = p.Port
		}
		return p.Port, end, true
	}
	for _, np := range podPorts {
		if np.Name == p.Name && np.Protocol == p.Protocol {
			return np.Port, np.Port, true
		}
	}
	return 0, 0, false
}

// Member is one pod in a group.
type Member struct {
	Namespace string
	Name      string
	Node      string
	IPs       []netip.Addr
	Ports     []NamedPort
}

// EventType says what an Event changes.
type EventType uint8

// The event types. Group events carry the group kind in the type because a
// node may hold the same group both as ATG (filtered to its pods) and as AG.
const (
	PolicyUpsert EventType = iota
	PolicyDelete
	AppliedToGroupUpsert
	AppliedToGroupPatch
	AppliedToGroupDelete
	AddressGroupUpsert
	AddressGroupPatch
	AddressGroupDelete
)

func (t EventType) String() string {
	return [...]string{"PolicyUpsert", "PolicyDelete", "AppliedToGroupUpsert", "AppliedToGroupPatch",
		"AppliedToGroupDelete", "AddressGroupUpsert", "AddressGroupPatch", "AddressGroupDelete"}[t]
}

// Event is one change for one node. Upserts carry the whole object (for an
// ATG only the node's own pods), patches carry added and removed members.
type Event struct {
	Type      EventType
	Policy    *Policy // PolicyUpsert
	PolicyUID string  // PolicyDelete
	Group     GroupID
	Added     []Member // group upsert: all members; patch: added ones
	Removed   []Member
}

// Sink receives events for watched nodes. It is called with the engine's lock
// held, in the order the node must apply the events, so it must not block and
// must not call back into the engine.
type Sink interface {
	Emit(node string, ev Event)
}

// GroupState is a group in a snapshot.
type GroupState struct {
	ID      GroupID
	Members []Member
}

// NodeSnapshot is everything one node needs, in application order: groups
// before the policies that use them.
type NodeSnapshot struct {
	AppliedToGroups []GroupState
	AddressGroups   []GroupState
	Policies        []*Policy
}
