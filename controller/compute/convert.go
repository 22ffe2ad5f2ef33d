package compute

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// PodFromKubernetes extracts what the engine needs from a Pod. ok is false
// for pods that take no part in policy: not yet scheduled, without an IP,
// finished, or on the host network.
func PodFromKubernetes(p *corev1.Pod) (out Pod, ok bool) {
	if p.Spec.NodeName == "" || p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return Pod{}, false
	}
	out = Pod{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, Labels: p.Labels}
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out.IPs = append(out.IPs, a)
		}
	}
	if len(out.IPs) == 0 && p.Status.PodIP != "" {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			out.IPs = append(out.IPs, a)
		}
	}
	if len(out.IPs) == 0 {
		return Pod{}, false
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == "" {
				continue
			}
			proto := cp.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			out.Ports = append(out.Ports, NamedPort{Name: cp.Name, Protocol: proto, Port: cp.ContainerPort})
		}
	}
	return out, true
}
