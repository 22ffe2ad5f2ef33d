package service

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/netns"
)

// TestExternalIPs: a Service's spec.externalIPs and its load-balancer
// ingress IP are served from outside (the external host routes them to
// node-1, which has no endpoint: externalTrafficPolicy Cluster, so the
// endpoint sees node-1's gateway address) and from a pod; once the
// Service is gone, node-1 no longer routes them into br-int.
func TestExternalIPs(t *testing.T) {
	e := start(t, 2)
	n1, n2 := e.c.Nodes[0], e.c.Nodes[1]
	b2 := e.backend(t, "b-2", n2)
	c := e.client(t, "c-1", n1)
	ext, _ := e.c.AddExternal(t, 250)
	extIP, lbIP := net.ParseIP("198.51.100.10"), net.ParseIP("198.51.100.20")
	for _, ip := range []net.IP{extIP, lbIP} {
		if out, err := netns.Exec(ext, "ip", "route", "add", ip.String()+"/32", "via", n1.UnderlayIP.String()); err != nil {
			t.Fatalf("external host route: %v %s", err, out)
		}
	}
	s := e.createService(t, "outside", whoPorts, func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.ExternalIPs = []string{extIP.String()}
	})
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lbIP.String()}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.cp.Client.CoreV1().Services(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting the load-balancer ingress IP: %v", err)
	}
	e.endpoints(t, "outside", whoPorts, b2)
	gw1 := n1.PodCIDR.IP.To4()
	gw1 = []byte{gw1[0], gw1[1], gw1[2], gw1[3] + 1}
	for _, ip := range []net.IP{extIP, lbIP} {
		for _, network := range []string{"tcp", "udp"} {
			eventually(t, fmt.Sprintf("%s to %s:90 from outside", network, ip), func() error {
				got, as, err := who(ext, network, ip, 90)
				if err != nil {
					return err
				}
				if got != b2.Name || as != gw1.String() {
					return fmt.Errorf("answered by %s seeing %s, want %s seeing node-1's gateway %s", got, as, b2.Name, gw1)
				}
				return nil
			})
			eventually(t, fmt.Sprintf("%s to %s:90 from a pod", network, ip), func() error {
				got, _, err := who(c.NetNS, network, ip, 90)
				if err == nil && got != b2.Name {
					err = fmt.Errorf("answered by %s", got)
				}
				return err
			})
		}
	}
	if err := e.cp.Client.CoreV1().Services(ns).Delete(ctx, "outside", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-1's routes to the external IPs gone", func() error {
		for _, ip := range []net.IP{extIP, lbIP} {
			out, _ := n1.Exec("ip", "route", "show", ip.String()+"/32")
			if out != "" {
				return fmt.Errorf("still %q", out)
			}
		}
		return nil
	})
}
