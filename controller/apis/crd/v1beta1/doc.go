// Package v1beta1 holds the Switchyard native policy API, group
// crd.switchyard.dev, version v1beta1: Tier, ClusterNetworkPolicy, the
// namespaced NetworkPolicy, ClusterGroup and Group; and the Egress API:
// ExternalIPPool and Egress (egress_types.go).
//
// Start with types.go. The CRD manifests under manifests/crds and
// zz_generated.deepcopy.go are generated from these types by controller-gen
// (see generate.go); never edit them by hand.
//
// +kubebuilder:object:generate=true
// +groupName=crd.switchyard.dev
package v1beta1
