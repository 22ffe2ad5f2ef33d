package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Tier orders native policies: a policy in a tier with a lower priority value
// is evaluated first. The controller creates the built-in tiers at start.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
type Tier struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TierSpec `json:"spec"`
}

// TierSpec is the desired state of a Tier.
type TierSpec struct {
	// Priority of the tier; lower values are evaluated first.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	Priority int32 `json:"priority"`
	// Description is free text for operators.
	// +optional
	Description string `json:"description,omitempty"`
}

// TierList is a list of Tiers.
//
// +kubebuilder:object:root=true
type TierList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tier `json:"items"`
}

// ClusterNetworkPolicy is a cluster-scoped native policy.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cnp
// +kubebuilder:printcolumn:name="Tier",type=string,JSONPath=`.spec.tier`
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
type ClusterNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PolicySpec   `json:"spec"`
	Status PolicyStatus `json:"status,omitempty"`
}

// ClusterNetworkPolicyList is a list of ClusterNetworkPolicies.
//
// +kubebuilder:object:root=true
type ClusterNetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterNetworkPolicy `json:"items"`
}

// NetworkPolicy is a namespaced native policy. Its selectors are confined to
// its own namespace unless a peer names a namespaceSelector.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=snp
// +kubebuilder:printcolumn:name="Tier",type=string,JSONPath=`.spec.tier`
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
type NetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PolicySpec   `json:"spec"`
	Status PolicyStatus `json:"status,omitempty"`
}

// NetworkPolicyList is a list of native NetworkPolicies.
//
// +kubebuilder:object:root=true
type NetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkPolicy `json:"items"`
}

// PolicySpec is shared by ClusterNetworkPolicy and NetworkPolicy.
type PolicySpec struct {
	// Tier names the Tier this policy belongs to; empty means "application".
	// +optional
	Tier string `json:"tier,omitempty"`
	// Priority within the tier; lower values are evaluated first.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Priority int32 `json:"priority"`
	// AppliedTo selects the pods the policy applies to. Either this or every
	// rule's appliedTo must be set.
	// +optional
	AppliedTo []AppliedTo `json:"appliedTo,omitempty"`
	// Ingress rules, evaluated in order.
	// +optional
	Ingress []Rule `json:"ingress,omitempty"`
	// Egress rules, evaluated in order.
	// +optional
	Egress []Rule `json:"egress,omitempty"`
}

// AppliedTo selects pods by selectors or by group name.
type AppliedTo struct {
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// Group names a ClusterGroup (for ClusterNetworkPolicy) or a Group in the
	// policy's namespace (for NetworkPolicy).
	// +optional
	Group string `json:"group,omitempty"`
}

// RuleAction is what a rule does with matching traffic.
// +kubebuilder:validation:Enum=Allow;Drop;Reject;Pass
type RuleAction string

// The rule actions.
const (
	RuleActionAllow  RuleAction = "Allow"
	RuleActionDrop   RuleAction = "Drop"
	RuleActionReject RuleAction = "Reject"
	RuleActionPass   RuleAction = "Pass"
)

// Rule is one ingress or egress rule of a native policy.
type Rule struct {
	// Name of the rule, unique within the policy; shown in logs.
	// +optional
	Name string `json:"name,omitempty"`
	// Action for traffic that matches the rule.
	Action RuleAction `json:"action"`
	// Ports the rule matches; empty matches every port.
	// +optional
	Ports []NetworkPolicyPort `json:"ports,omitempty"`
	// From lists the sources of an ingress rule; empty matches every source.
	// +optional
	From []Peer `json:"from,omitempty"`
	// To lists the destinations of an egress rule; empty matches every destination.
	// +optional
	To []Peer `json:"to,omitempty"`
	// AppliedTo overrides the policy's appliedTo for this rule.
	// +optional
	AppliedTo []AppliedTo `json:"appliedTo,omitempty"`
	// EnableLogging asks the agent to log packets that match this rule.
	// +optional
	EnableLogging bool `json:"enableLogging,omitempty"`
}

// Peer is a source or destination of a rule.
type Peer struct {
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// +optional
	IPBlock *IPBlock `json:"ipBlock,omitempty"`
	// Group names a ClusterGroup or (namespaced policies) a Group.
	// +optional
	Group string `json:"group,omitempty"`
}

// IPBlock is a CIDR with optional exceptions.
type IPBlock struct {
	// CIDR such as 10.0.0.0/8 or 2001:db8::/32.
	CIDR string `json:"cidr"`
	// Except lists CIDRs inside CIDR that are not matched.
	// +optional
	Except []string `json:"except,omitempty"`
}

// NetworkPolicyPort selects a protocol and a port or port range.
type NetworkPolicyPort struct {
	// +optional
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	Protocol *corev1.Protocol `json:"protocol,omitempty"`
	// Port number or named container port.
	// +optional
	Port *intstr.IntOrString `json:"port,omitempty"`
	// EndPort makes Port the start of a range; Port must then be a number.
	// +optional
	EndPort *int32 `json:"endPort,omitempty"`
}

// PolicyPhase summarises realization of a policy.
type PolicyPhase string

// The policy phases.
const (
	PolicyPending   PolicyPhase = "Pending"
	PolicyRealizing PolicyPhase = "Realizing"
	PolicyRealized  PolicyPhase = "Realized"
	PolicyFailed    PolicyPhase = "Failed"
)

// PolicyStatus is written by the controller.
type PolicyStatus struct {
	// +optional
	Phase PolicyPhase `json:"phase,omitempty"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// CurrentNodesRealized counts nodes that realized ObservedGeneration.
	// +optional
	CurrentNodesRealized int32 `json:"currentNodesRealized"`
	// DesiredNodesRealized counts nodes in the policy's span.
	// +optional
	DesiredNodesRealized int32 `json:"desiredNodesRealized"`
	// Conditions such as Valid=False with the reason a policy is not computed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterGroup is a cluster-scoped named set of pods and IP blocks.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cg
type ClusterGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GroupSpec   `json:"spec"`
	Status GroupStatus `json:"status,omitempty"`
}

// ClusterGroupList is a list of ClusterGroups.
//
// +kubebuilder:object:root=true
type ClusterGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterGroup `json:"items"`
}

// Group is a namespaced named set of pods and IP blocks; its pod selector is
// confined to its namespace unless namespaceSelector is set.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sg
type Group struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GroupSpec   `json:"spec"`
	Status GroupStatus `json:"status,omitempty"`
}

// GroupList is a list of Groups.
//
// +kubebuilder:object:root=true
type GroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Group `json:"items"`
}

// GroupSpec is shared by ClusterGroup and Group. Members are the union of the
// selected pods, the IP blocks and the members of the child groups. Child
// groups may not have children themselves.
type GroupSpec struct {
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// +optional
	IPBlocks []IPBlock `json:"ipBlocks,omitempty"`
	// +optional
	ChildGroups []string `json:"childGroups,omitempty"`
}

// GroupStatus is written by the controller.
type GroupStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
