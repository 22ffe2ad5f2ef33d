package netpolmodel

import (
	"context"
	"net"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"switchyard.dev/switchyard/itest/testenv"
)

// ServiceClusterIP creates the Service ns/name with TCP port 80 onto port
// 80 of the given model pods and its EndpointSlice (the harness runs no
// EndpointSlice controller), and returns its ClusterIP. It needs
// Options.Service. The Service and the slice are deleted on cleanup.
func (e *Env) ServiceClusterIP(t testenv.T, ns, name string, pods ...string) net.IP {
	t.Helper()
	ctx := context.Background()
	svc, err := e.CP.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80,
			TargetPort: intstr.FromInt32(80)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Service %s/%s: %v", ns, name, err)
	}
	t.Cleanup(func() { e.CP.Client.CoreV1().Services(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	portName, proto, port, ready := "http", corev1.ProtocolTCP, int32(80), true
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-model", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &port}},
	}
	for _, k := range pods {
		p := e.Pods[k]
		node := p.Node.Name
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.IP().String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}, NodeName: &node})
	}
	if _, err := e.CP.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating EndpointSlice %s/%s: %v", ns, es.Name, err)
	}
	t.Cleanup(func() {
		e.CP.Client.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), es.Name, metav1.DeleteOptions{})
	})
	return net.ParseIP(svc.Spec.ClusterIP)
}
