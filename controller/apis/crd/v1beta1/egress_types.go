package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExternalIPPool is a set of IPs that Egresses (and, later, Services) take
// their external addresses from, and the nodes that may hold them.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=eip
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.usage.total`
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=`.status.usage.used`
type ExternalIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ExternalIPPoolSpec   `json:"spec"`
	Status ExternalIPPoolStatus `json:"status,omitempty"`
}

// ExternalIPPoolSpec is the desired state of an ExternalIPPool.
type ExternalIPPoolSpec struct {
	// IPRanges are the pool's addresses.
	// +kubebuilder:validation:MinItems=1
	IPRanges []IPRange `json:"ipRanges"`
	// SubnetInfo describes the subnet the addresses belong to: the node
	// holding one of them sends the Egress traffic of that address to the
	// subnet's gateway on its uplink, not by its main routing table. The
	// gateway is IPv4 (IPv6 subnets are not supported yet), every range
	// must lie inside gateway/prefixLength, the gateway outside the
	// ranges; otherwise the pool is invalid.
	// +optional
	SubnetInfo *SubnetInfo `json:"subnetInfo,omitempty"`
	// NodeSelector picks the nodes that may hold the pool's IPs; empty
	// selects every node.
	// +optional
	NodeSelector metav1.LabelSelector `json:"nodeSelector,omitempty"`
}

// IPRange is either a CIDR or an inclusive Start–End range of one family.
type IPRange struct {
	// CIDR such as 198.18.0.64/28. The network and broadcast addresses of
	// an IPv4 CIDR wider than /31 are left out.
	// +optional
	CIDR string `json:"cidr,omitempty"`
	// Start of an inclusive range.
	// +optional
	Start string `json:"start,omitempty"`
	// End of an inclusive range.
	// +optional
	End string `json:"end,omitempty"`
}

// SubnetInfo is the subnet of a pool's addresses.
type SubnetInfo struct {
	// Gateway is the subnet's router, such as 198.18.1.1.
	Gateway string `json:"gateway"`
	// PrefixLength of the subnet: 1-32 for an IPv4 gateway, 1-128 for
	// IPv6.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	PrefixLength int32 `json:"prefixLength"`
}

// ExternalIPPoolStatus is what the controller observed of a pool.
type ExternalIPPoolStatus struct {
	// Usage counts the pool's addresses.
	// +optional
	Usage IPPoolUsage `json:"usage,omitempty"`
}

// IPPoolUsage counts a pool's addresses.
type IPPoolUsage struct {
	// Total is the number of addresses in the pool.
	Total int32 `json:"total"`
	// Used is the number of addresses allocated from it.
	Used int32 `json:"used"`
}

// ExternalIPPoolList is a list of ExternalIPPools.
//
// +kubebuilder:object:root=true
type ExternalIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ExternalIPPool `json:"items"`
}

// Egress gives the pods it applies to a fixed source IP when they reach
// outside the cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="EgressIP",type=string,JSONPath=`.status.egressIP`
// +kubebuilder:printcolumn:name="EgressIPs",type=string,JSONPath=`.status.egressIPs`,priority=1
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.egressNode`
type Egress struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EgressSpec   `json:"spec"`
	Status EgressStatus `json:"status,omitempty"`
}

// EgressSpec is the desired state of an Egress.
type EgressSpec struct {
	// AppliedTo selects the pods whose traffic leaves with the Egress IP.
	AppliedTo EgressAppliedTo `json:"appliedTo"`
	// EgressIP asks for this address, IPv4 or IPv6; the Egress then
	// applies to the selected pods' addresses of that family. With
	// ExternalIPPool it must lie in that pool; without, the holding node
	// is chosen among all nodes.
	// +optional
	EgressIP string `json:"egressIP,omitempty"`
	// ExternalIPPool names the pool the address comes from. A pool with
	// ranges of both families gives the Egress one address of each
	// (dual-stack): the pods' IPv4 traffic leaves with the IPv4 one, their
	// IPv6 traffic with the IPv6 one.
	// +optional
	ExternalIPPool string `json:"externalIPPool,omitempty"`
	// Bandwidth limits the selected pods' traffic through the Egress IP.
	// +optional
	Bandwidth *Bandwidth `json:"bandwidth,omitempty"`
}

// EgressAppliedTo selects pods by their labels and their namespace's
// labels; a nil selector matches everything, and at least one is set.
type EgressAppliedTo struct {
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// Bandwidth is a rate limit.
type Bandwidth struct {
	// Rate such as 10M (bits per second, k/M/G suffixes).
	Rate string `json:"rate"`
	// Burst such as 1M (bits).
	Burst string `json:"burst"`
}

// EgressStatus is what the controller and the agents observed.
type EgressStatus struct {
	// EgressIP is the address allocated to the Egress (the IPv4 one of a
	// dual-stack Egress).
	// +optional
	EgressIP string `json:"egressIP,omitempty"`
	// EgressIPs are all addresses allocated to the Egress, one per family,
	// IPv4 first. Every one of them is held by EgressNode.
	// +optional
	EgressIPs []string `json:"egressIPs,omitempty"`
	// EgressNode is the node that holds the address.
	// +optional
	EgressNode string `json:"egressNode,omitempty"`
	// Conditions: IPAllocated (the controller) and IPAssigned (the
	// holding node's agent).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EgressList is a list of Egresses.
//
// +kubebuilder:object:root=true
type EgressList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Egress `json:"items"`
}

// Egress condition types and reasons.
const (
	ConditionIPAllocated = "IPAllocated"
	ConditionIPAssigned  = "IPAssigned"

	ReasonAllocated     = "Allocated"
	ReasonPoolExhausted = "PoolExhausted"
	ReasonPoolNotFound  = "PoolNotFound"
	// ReasonPoolInvalid: the pool's spec is unusable (its ipRanges or
	// subnetInfo); the message says what to fix.
	ReasonPoolInvalid   = "PoolInvalid"
	ReasonIPOutsidePool = "IPOutsidePool"
	ReasonIPConflict    = "IPConflict"
	ReasonInvalidIP     = "InvalidIP"
	ReasonNoIP          = "NoIPRequested"
	ReasonAssigned      = "Assigned"
	// ReasonNoEligibleNode: no live node matches the pool's nodeSelector.
	ReasonNoEligibleNode = "NoEligibleNode"
)
