package netpolmodel

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Builders for the policies scenarios use; they read like the YAML.

// Policy is a NetworkPolicy in ns selecting pods (nil: every pod).
func Policy(ns, name string, pods *metav1.LabelSelector) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if pods != nil {
		np.Spec.PodSelector = *pods
	}
	return np
}

// Types sets policyTypes.
func Types(np *networkingv1.NetworkPolicy, ingress, egress bool) *networkingv1.NetworkPolicy {
	np.Spec.PolicyTypes = nil
	if ingress {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
	}
	if egress {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	}
	return np
}

// In adds an ingress rule.
func In(np *networkingv1.NetworkPolicy, from []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) *networkingv1.NetworkPolicy {
	np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: from, Ports: ports})
	if !hasType(np, networkingv1.PolicyTypeIngress) {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
	}
	return np
}

// Out adds an egress rule.
func Out(np *networkingv1.NetworkPolicy, to []networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) *networkingv1.NetworkPolicy {
	np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: to, Ports: ports})
	if !hasType(np, networkingv1.PolicyTypeEgress) {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	}
	return np
}

func hasType(np *networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	for _, x := range np.Spec.PolicyTypes {
		if x == t {
			return true
		}
	}
	return false
}

// Labels is a selector by labels.
func Labels(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

// Expr is a selector with one expression.
func Expr(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// Peers builds a peer list.
func Peers(ps ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer { return ps }

// PodPeer selects pods of the policy's namespace.
func PodPeer(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: s}
}

// NSPeer selects every pod of the selected namespaces.
func NSPeer(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: s}
}

// NSPodPeer selects the pods matching pods in the namespaces matching ns.
func NSPodPeer(ns, pods *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: ns, PodSelector: pods}
}

// IPPeer is an ipBlock.
func IPPeer(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

// Port is a numbered port (0: every port of proto).
func Port(proto corev1.Protocol, port int32) networkingv1.NetworkPolicyPort {
	p := networkingv1.NetworkPolicyPort{Protocol: &proto}
	if port != 0 {
		v := intstr.FromInt32(port)
		p.Port = &v
	}
	return p
}

// Range is port..end.
func Range(proto corev1.Protocol, port, end int32) networkingv1.NetworkPolicyPort {
	p := Port(proto, port)
	p.EndPort = &end
	return p
}

// Named is a named container port.
func Named(proto corev1.Protocol, name string) networkingv1.NetworkPolicyPort {
	v := intstr.FromString(name)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
}
