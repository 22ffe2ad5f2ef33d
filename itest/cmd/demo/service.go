package main

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

// showService creates the Service demo/a (TCP, UDP and SCTP port 80 to
// 8080 of the app=a pods) and its EndpointSlice, standing in for the
// EndpointSlice controller the harness does not run yet, then probes the
// ClusterIP from every pod and every node. It reports whether every cell
// was ok.
func showService(t testenv.T, cp *controlplane.ControlPlane, pods []*cluster.Pod, from []probe.Endpoint) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	protos := map[corev1.Protocol]probe.Protocol{corev1.ProtocolTCP: probe.TCP, corev1.ProtocolUDP: probe.UDP, corev1.ProtocolSCTP: probe.SCTP}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "demo"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "a"}}}
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "a-1", Namespace: "demo", Labels: map[string]string{discoveryv1.LabelServiceName: "a"}},
		AddressType: discoveryv1.AddressTypeIPv4}
	for _, p := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
		name := string(protos[p])
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: name, Protocol: p, Port: 80, TargetPort: intstr.FromInt32(8080)})
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: &name, Protocol: &p, Port: ptr(int32(8080))})
	}
	var backends []string
	for _, p := range pods {
		if p.Name[0] == 'a' {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.IP().String()},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}, NodeName: ptr(p.Node.Name)})
			backends = append(backends, p.Name)
		}
	}
	got, err := cp.Client.CoreV1().Services("demo").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating Service demo/a: %v", err)
	}
	if _, err := cp.Client.DiscoveryV1().EndpointSlices("demo").Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating EndpointSlice demo/a-1: %v", err)
	}
	ip := net.ParseIP(got.Spec.ClusterIP)
	fmt.Printf("\nService demo/a: ClusterIP %s, port 80 (TCP, UDP, SCTP) → 8080 of %v, balanced in br-int by the service plugin (no kube-proxy)\n", ip, backends)
	// The plugins install it within moments; wait for the first answer.
	_ = testenv.Eventually("the ClusterIP", 20*time.Second, 100*time.Millisecond, func() error {
		return probe.Check(from[0].NetNS, probe.TCP, ip, 80, time.Second)
	})
	to := []probe.Endpoint{{Name: "demo/a " + ip.String(), IP: ip}}
	ok := true
	for _, proto := range []probe.Protocol{probe.TCP, probe.UDP, probe.SCTP} {
		m := probe.Run(from, to, proto, 80, probe.MatrixOptions{Timeout: 2 * time.Second})
		fmt.Printf("ClusterIP connectivity, %s (rows: from):\n%s\n", proto, m)
		if d := m.Diff(probe.Expect(from, to, true, false)); d != "" {
			ok = false
			fmt.Printf("UNEXPECTED (got!want):\n%s\n", d)
		}
	}
	return ok
}

func ptr[T any](v T) *T { return &v }
