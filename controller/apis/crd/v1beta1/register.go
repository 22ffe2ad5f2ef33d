package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every Switchyard native resource.
const GroupName = "crd.switchyard.dev"

// SchemeGroupVersion is the group and version these types are served at.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

// Resource names as served by the apiserver, for dynamic clients and informers.
var (
	TiersResource                  = SchemeGroupVersion.WithResource("tiers")
	ClusterNetworkPoliciesResource = SchemeGroupVersion.WithResource("clusternetworkpolicies")
	NetworkPoliciesResource        = SchemeGroupVersion.WithResource("networkpolicies")
	ClusterGroupsResource          = SchemeGroupVersion.WithResource("clustergroups")
	GroupsResource                 = SchemeGroupVersion.WithResource("groups")
	NodeAgentsResource             = SchemeGroupVersion.WithResource("nodeagents")
	ControllerInfosResource        = SchemeGroupVersion.WithResource("controllerinfos")
	ExternalIPPoolsResource        = SchemeGroupVersion.WithResource("externalippools")
	EgressesResource               = SchemeGroupVersion.WithResource("egresses")
	TraceflowsResource             = SchemeGroupVersion.WithResource("traceflows")
)

var (
	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&Tier{}, &TierList{},
		&ClusterNetworkPolicy{}, &ClusterNetworkPolicyList{},
		&NetworkPolicy{}, &NetworkPolicyList{},
		&ClusterGroup{}, &ClusterGroupList{},
		&Group{}, &GroupList{},
		&NodeAgent{}, &NodeAgentList{},
		&ControllerInfo{}, &ControllerInfoList{},
		&ExternalIPPool{}, &ExternalIPPoolList{},
		&Egress{}, &EgressList{},
		&Traceflow{}, &TraceflowList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
