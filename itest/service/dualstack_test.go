package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/plugins/service/hostnet"
)

// dualStack makes a Service RequireDualStack, IPv4 first.
func dualStack(s *corev1.Service) {
	s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicyRequireDualStack)
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
}

// clusterIPs returns a Service's IPv4 and IPv6 ClusterIPs.
func clusterIPs(t *testing.T, s *corev1.Service) (v4, v6 net.IP) {
	t.Helper()
	for _, a := range s.Spec.ClusterIPs {
		ip := net.ParseIP(a)
		switch {
		case ip == nil:
		case ip.To4() != nil:
			v4 = ip
		default:
			v6 = ip
		}
	}
	if v4 == nil || v6 == nil {
		t.Fatalf("Service %s has ClusterIPs %v, want one of each family", s.Name, s.Spec.ClusterIPs)
	}
	return v4, v6
}

// gateway6 is node n's IPv6 gateway address (the first of its pod CIDR).
func gateway6(n *cluster.Node) net.IP {
	gw := slices.Clone(n.PodCIDRv6.IP.To16())
	gw[15]++
	return gw
}

// TestDualStack runs Services on dual-stack nodes whose apiserver
// allocates from an IPv4 and an IPv6 Service CIDR. A RequireDualStack
// Service with an endpoint on every node is reached on its IPv6 ClusterIP
// from a pod on every node and from every node over TCP, UDP and SCTP,
// answered by its endpoints' IPv6 addresses (each backend sees the
// client's own IPv6 address), and still on its IPv4 ClusterIP over IPv4;
// its IPv6 NodePort is reached from an external host on the underlay with
// both externalTrafficPolicy values; a Service without endpoints refuses
// at once over IPv6 (TCP RST, ICMPv6 port unreachable); an endpoint
// reaching itself through the IPv6 ClusterIP is a hairpin, seen as the
// IPv6 hairpin address. IPv6 external and load-balancer IPs are served
// from outside and from pods, and their routes leave with the Service;
// ClientIP affinity holds over IPv6 and expires after its timeout; a
// departed IPv6 UDP endpoint's conntrack entries are flushed. Last,
// node-1's plugin takes back what an earlier incarnation or configuration
// left: a route to an external IP whose Service went while the agent was
// down, and, once the operator drops the IPv6 Service CIDR, every IPv6
// route, the IPv6 hairpin neighbour and the ip6 NodePort table.
func TestDualStack(t *testing.T) {
	e := startDualStack(t, 3)
	var backends, clients []*cluster.Pod
	for _, n := range e.c.Nodes {
		backends = append(backends, e.backend(t, fmt.Sprintf("b-%d", n.Index), n))
		clients = append(clients, e.client(t, fmt.Sprintf("c-%d", n.Index), n))
	}
	echo := e.createService(t, "echo", echoPorts, dualStack)
	e.endpoints(t, "echo", echoPorts, backends...)
	e.endpoints6(t, "echo", echoPorts, backends...)
	ip4, ip6 := clusterIPs(t, echo)
	names := map[string]bool{}
	for _, b := range backends {
		names[b.Name] = true
	}
	t.Logf("Service echo (%s): ClusterIPs %s and %s, backends %v", *echo.Spec.IPFamilyPolicy, ip4, ip6, backendIPs(backends))

	t.Run("IPv6 ClusterIP from pods and nodes, IPv4 on the same Service", func(t *testing.T) {
		type from struct {
			name, netns string
			// seen4 and seen6 are the addresses a backend sees it as.
			seen4, seen6 net.IP
		}
		var froms []from
		for _, c := range clients {
			froms = append(froms, from{c.Name + "@" + c.Node.Name, c.NetNS, c.IP(), ip6Of(t, c)})
		}
		for _, n := range e.c.Nodes {
			// The node's connections leave through the gateway device,
			// which holds its first pod address of each family.
			gw4 := slices.Clone(n.PodCIDR.IP.To4())
			gw4[3]++
			froms = append(froms, from{n.Name, n.NetNS, gw4, gateway6(n)})
		}
		for _, f := range froms {
			for _, proto := range []probe.Protocol{probe.TCP, probe.UDP, probe.SCTP} {
				eventually(t, fmt.Sprintf("%s from %s to [%s]:80", proto, f.name, ip6), func() error {
					return probe.Check(f.netns, proto, ip6, 80, 2*time.Second)
				})
			}
			for _, c := range []struct {
				ip   net.IP
				seen net.IP
			}{{ip6, f.seen6}, {ip4, f.seen4}} {
				for _, network := range []string{"tcp", "udp"} {
					seen := map[string]int{}
					for i := range 15 {
						what := fmt.Sprintf("%s from %s to %s, try %d", network, f.name, net.JoinHostPort(c.ip.String(), "90"), i)
						eventually(t, what, func() error {
							b, as, err := who(f.netns, network, c.ip, 90)
							if err != nil {
								return err
							}
							if !names[b] || as != c.seen.String() {
								return fmt.Errorf("answered by %q seeing %s; want a backend seeing %s", b, as, c.seen)
							}
							seen[b]++
							return nil
						})
					}
					if len(seen) < 2 {
						t.Errorf("%s from %s to %s: 15 connections reached only %v", network, f.name, c.ip, seen)
					}
				}
			}
		}
	})

	t.Run("IPv6 NodePort from the external host", func(t *testing.T) {
		n1, n2 := e.c.Nodes[0], e.c.Nodes[1]
		b2 := backends[1]
		ext, _ := e.c.AddExternal(t, 250)
		extIP6 := cluster.UnderlayIPv6(250)
		nodePort := func(p corev1.ServiceExternalTrafficPolicy) func(*corev1.Service) {
			return func(s *corev1.Service) {
				dualStack(s)
				s.Spec.Type, s.Spec.ExternalTrafficPolicy = corev1.ServiceTypeNodePort, p
			}
		}
		cl := nodePorts(e.createService(t, "np-cluster", whoPorts, nodePort(corev1.ServiceExternalTrafficPolicyCluster)))
		lo := nodePorts(e.createService(t, "np-local", whoPorts, nodePort(corev1.ServiceExternalTrafficPolicyLocal)))
		for _, svc := range []string{"np-cluster", "np-local"} {
			e.endpoints(t, svc, whoPorts, backends[1:]...)
			e.endpoints6(t, svc, whoPorts, backends[1:]...)
		}
		t.Logf("NodePorts: cluster %v, local %v; external host %s", cl, lo, extIP6)
		for _, network := range []string{"tcp", "udp"} {
			port := map[string]string{"tcp": "who", "udp": "who-udp"}[network]
			// Cluster, through node-1 (no endpoint): SNATed to its IPv6 gateway.
			seen := map[string]int{}
			for i := range 15 {
				what := fmt.Sprintf("%s to node-1 [%s]:%d (Cluster), try %d", network, n1.UnderlayIPv6, cl[port], i)
				eventually(t, what, func() error {
					b, as, err := who(ext, network, n1.UnderlayIPv6, cl[port])
					if err != nil {
						return err
					}
					if !names[b] || b == backends[0].Name || as != gateway6(n1).String() {
						return fmt.Errorf("answered by %q seeing %s; want b-2 or b-3 seeing node-1's gateway %s", b, as, gateway6(n1))
					}
					seen[b]++
					return nil
				})
			}
			if len(seen) != 2 {
				t.Errorf("%s NodePort (Cluster) through node-1 reached %v, want both endpoints", network, seen)
			}
			// Local, through node-2: its own endpoint sees the client.
			eventually(t, network+" to node-2's IPv6 NodePort (Local)", func() error {
				b, as, err := who(ext, network, n2.UnderlayIPv6, lo[port])
				if err != nil {
					return err
				}
				if b != b2.Name || as != extIP6.String() {
					return fmt.Errorf("answered by %q seeing %s; want %s seeing the client %s", b, as, b2.Name, extIP6)
				}
				return nil
			})
			// In-cluster clients over IPv6: the nodes and their pods. Their
			// answers go back through the node that translated the node
			// address; Local gives them every endpoint.
			n3, c1, b3 := e.c.Nodes[2], clients[0], backends[2]
			for _, pc := range []struct {
				what   string
				from   string
				node   net.IP
				port   int
				answer []string
				seenAs string // "": any
			}{
				{"node-1 to its own NodePort (Cluster)", n1.NetNS, n1.UnderlayIPv6, cl[port], []string{b2.Name, b3.Name}, ""},
				{"node-1 to its own NodePort (Local, in-cluster client)", n1.NetNS, n1.UnderlayIPv6, lo[port], []string{b2.Name, b3.Name}, ""},
				{"pod on node-1 to node-1 (Cluster)", c1.NetNS, n1.UnderlayIPv6, cl[port], []string{b2.Name, b3.Name}, ""},
				{"pod on node-1 to node-3 (Cluster)", c1.NetNS, n3.UnderlayIPv6, cl[port], []string{b2.Name, b3.Name}, ""},
				{"pod on node-1 to node-1 (Local, in-cluster client)", c1.NetNS, n1.UnderlayIPv6, lo[port], []string{b2.Name, b3.Name}, ""},
				{"endpoint b-2 to its own node-2 (Local, hairpin)", b2.NetNS, n2.UnderlayIPv6, lo[port], []string{b2.Name}, ""},
				// A pod of another node is an in-cluster client too: its
				// node keeps its address towards every node address, IPv6
				// ones included, and node-1 gives it every endpoint, SNATed
				// to its gateway so the answers come back through it.
				{"pod on node-3 to node-1 (Local, in-cluster client)", clients[2].NetNS, n1.UnderlayIPv6, lo[port], []string{b2.Name, b3.Name}, gateway6(n1).String()},
				{"b-3 on node-3 to node-1 (Cluster)", b3.NetNS, n1.UnderlayIPv6, cl[port], []string{b2.Name, b3.Name}, gateway6(n1).String()},
			} {
				what := fmt.Sprintf("%s [%s]:%d over %s", pc.what, pc.node, pc.port, network)
				err := testenv.Eventually(what, 20*time.Second, 100*time.Millisecond, func() error {
					got, as, err := who(pc.from, network, pc.node, pc.port)
					if err != nil {
						return err
					}
					if !slices.Contains(pc.answer, got) || (pc.seenAs != "" && as != pc.seenAs) {
						return fmt.Errorf("answered by %q seeing %s, want one of %v seeing %q", got, as, pc.answer, pc.seenAs)
					}
					return nil
				})
				if err != nil {
					t.Errorf("%v", err)
				}
			}
			// Local, through node-1: no endpoint there, refused at once.
			start := time.Now()
			_, _, err := who(ext, network, n1.UnderlayIPv6, lo[port])
			if o := outcome(err); o != "refused" {
				t.Errorf("%s to node-1's IPv6 NodePort (Local, no endpoint there): %s after %s, want refused", network, o, time.Since(start))
			}
		}
	})

	t.Run("external and load-balancer IPv6 addresses", func(t *testing.T) {
		n1, b2 := e.c.Nodes[0], backends[1]
		ext, _ := e.c.AddExternal(t, 251)
		extIP, lbIP := net.ParseIP("fd00:198:51::10"), net.ParseIP("fd00:198:51::20")
		for _, ip := range []net.IP{extIP, lbIP} {
			if out, err := netns.Exec(ext, "ip", "-6", "route", "add", ip.String()+"/128", "via", n1.UnderlayIPv6.String()); err != nil {
				t.Fatalf("external host route: %v %s", err, out)
			}
		}
		s := e.createService(t, "outside", whoPorts, func(s *corev1.Service) {
			dualStack(s)
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalIPs = []string{extIP.String()}
		})
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lbIP.String()}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := e.cp.Client.CoreV1().Services(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("setting the load-balancer ingress IP: %v", err)
		}
		e.endpoints6(t, "outside", whoPorts, b2)
		for _, ip := range []net.IP{extIP, lbIP} {
			for _, network := range []string{"tcp", "udp"} {
				// node-1 has no endpoint: Cluster, SNATed to its gateway.
				eventually(t, fmt.Sprintf("%s to [%s]:90 from outside", network, ip), func() error {
					got, as, err := who(ext, network, ip, 90)
					if err != nil {
						return err
					}
					if got != b2.Name || as != gateway6(n1).String() {
						return fmt.Errorf("answered by %q seeing %s, want %s seeing node-1's gateway %s", got, as, b2.Name, gateway6(n1))
					}
					return nil
				})
				// A pod of node-1 too (SNATed as well, as over IPv4).
				eventually(t, fmt.Sprintf("%s to [%s]:90 from a pod", network, ip), func() error {
					got, as, err := who(clients[0].NetNS, network, ip, 90)
					if err == nil && (got != b2.Name || as != gateway6(n1).String()) {
						err = fmt.Errorf("answered by %q seeing %s, want %s seeing node-1's gateway %s", got, as, b2.Name, gateway6(n1))
					}
					return err
				})
			}
		}
		if err := e.cp.Client.CoreV1().Services(ns).Delete(ctx, "outside", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "node-1's routes to the IPv6 external addresses gone", func() error {
			for _, ip := range []net.IP{extIP, lbIP} {
				if out, _ := n1.Exec("ip", "-6", "route", "show", ip.String()+"/128"); out != "" {
					return fmt.Errorf("still %q", out)
				}
			}
			return nil
		})
	})

	t.Run("session affinity over IPv6", func(t *testing.T) {
		const timeout = 2
		s := e.createService(t, "sticky", whoPorts, func(s *corev1.Service) {
			dualStack(s)
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(timeout))}}
		})
		_, sticky6 := clusterIPs(t, s)
		e.endpoints6(t, "sticky", whoPorts, backends...)
		c := clients[0]
		var first string
		eventually(t, "the sticky Service over IPv6", func() (err error) {
			first, _, err = who(c.NetNS, "tcp", sticky6, 90)
			return err
		})
		// A learn that lost a word of the endpoint would send these
		// elsewhere, or nowhere.
		for i := range 20 {
			if got, _, err := who(c.NetNS, "tcp", sticky6, 90); err != nil || got != first {
				t.Fatalf("connection %d reached %q (%v), want %s, where the client's first connection went", i, got, err, first)
			}
		}
		// Another client is balanced on its own.
		for _, o := range clients[1:] {
			if _, _, err := who(o.NetNS, "tcp", sticky6, 90); err != nil {
				t.Errorf("%s to the sticky Service: %v", o.Name, err)
			}
		}
		// The learned entry expires after the timeout, over IPv6 too.
		t.Logf("endpoints met across idle periods over IPv6: %v", affinityExpires(t, c.NetNS, sticky6, timeout, first))
	})

	t.Run("a departed IPv6 UDP endpoint's conntrack entries are flushed", func(t *testing.T) {
		b1, b2 := backends[0], backends[1]
		_, stale6 := clusterIPs(t, e.createService(t, "stale", whoPorts, dualStack))
		e.endpoints6(t, "stale", whoPorts, b1, b2)
		staleUDPMoves(t, clients[2].NetNS, stale6.String(), b1, b2, func(stay *cluster.Pod) { e.endpoints6(t, "stale", whoPorts, stay) })
	})

	t.Run("no endpoints rejects at once over IPv6", func(t *testing.T) {
		_, empty6 := clusterIPs(t, e.createService(t, "empty", whoPorts, dualStack))
		c := clients[0]
		for _, network := range []string{"tcp", "udp"} {
			eventually(t, fmt.Sprintf("%s to [%s]:90 refused", network, empty6), func() error {
				start := time.Now()
				_, _, err := who(c.NetNS, network, empty6, 90)
				if o := outcome(err); o != "refused" || time.Since(start) > time.Second {
					return fmt.Errorf("%s after %s, want refused at once", o, time.Since(start))
				}
				return nil
			})
		}
	})

	t.Run("hairpin over IPv6", func(t *testing.T) {
		b := backends[0]
		_, self6 := clusterIPs(t, e.createService(t, "self", whoPorts, dualStack))
		e.endpoints6(t, "self", whoPorts, b)
		for _, network := range []string{"tcp", "udp"} {
			eventually(t, fmt.Sprintf("%s from %s to itself through [%s]:90", network, b.Name, self6), func() error {
				got, as, err := who(b.NetNS, network, self6, 90)
				if err != nil {
					return err
				}
				if got != b.Name || as != "fd00:5ce::fd" {
					return fmt.Errorf("answered by %q seeing %s; want %s seeing the IPv6 hairpin address fd00:5ce::fd", got, as, b.Name)
				}
				return nil
			})
		}
	})

	// Last: it turns node-1 IPv4-only.
	t.Run("going IPv4-only leaves no IPv6 route, neighbour or table; a route the plugin missed is swept", func(t *testing.T) {
		n1 := e.c.Nodes[0]
		a1 := e.agents[n1.Name]
		owned := func(family string) string {
			out, err := n1.Exec("ip", family, "route", "show", "dev", "sy-gw0", "proto", "89")
			if err != nil {
				t.Fatalf("ip %s route: %v %s", family, err, out)
			}
			return strings.TrimSpace(out)
		}
		ip6Table := func() bool {
			out, err := n1.Exec("nft", "list", "tables", "ip6")
			if err != nil {
				t.Fatalf("nft list tables: %v %s", err, out)
			}
			return strings.Contains(out, hostnet.TableName)
		}
		// An IPv6 NodePort, so node-1 has an ip6 table, and an IPv4
		// external IP, routed into br-int.
		e.createService(t, "np-left", whoPorts, func(s *corev1.Service) {
			dualStack(s)
			s.Spec.Type = corev1.ServiceTypeNodePort
		})
		e.endpoints6(t, "np-left", whoPorts, backends[1])
		const extIP = "192.0.2.99"
		e.createService(t, "ext-left", whoPorts, func(s *corev1.Service) { s.Spec.ExternalIPs = []string{extIP} })
		e.endpoints(t, "ext-left", whoPorts, backends[1])
		eventually(t, "node-1's ip6 NodePort table and its routes of both families", func() error {
			if !ip6Table() {
				return errors.New("no ip6 table " + hostnet.TableName)
			}
			if !strings.Contains(owned("-4"), extIP) {
				return fmt.Errorf("no route to %s: %q", extIP, owned("-4"))
			}
			if owned("-6") == "" {
				return errors.New("no IPv6 route")
			}
			return nil
		})

		// The external IP's Service goes while the agent (and with it the
		// plugin) is down: the next incarnation finds the route left.
		a1.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.cp.Client.CoreV1().Services(ns).Delete(ctx, "ext-left", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		a1.Run(t)
		e.waitSynced(t, n1)
		eventually(t, "the route to "+extIP+" left by the earlier incarnation gone", func() error {
			if out := owned("-4"); strings.Contains(out, extIP) {
				return fmt.Errorf("still %q", out)
			}
			return nil
		})

		// The operator drops the IPv6 Service CIDR: the plugin restarts
		// with the new config and takes back what only IPv6 needed.
		_, before, _ := e.plugin(t, n1, "service")
		a1.SetConfig(t, "service", "serviceCIDRs", []string{controlplane.ServiceCIDR})
		eventually(t, "the service plugin restarted IPv4-only and synced", func() error {
			if st, pid, _ := e.plugin(t, n1, "service"); pid == before || st != "synced" {
				return fmt.Errorf("service is %s (pid %d, %d before the change)", st, pid, before)
			}
			return nil
		})
		eventually(t, "node-1 without IPv6 routes, neighbour or ip6 table", func() error {
			if out := owned("-6"); out != "" {
				return fmt.Errorf("IPv6 routes left: %q", out)
			}
			if ip6Table() {
				return errors.New("ip6 table " + hostnet.TableName + " left")
			}
			if out, _ := n1.Exec("ip", "-6", "neigh", "show", "dev", "sy-gw0"); strings.Contains(out, "fd00:5ce::fd") {
				return fmt.Errorf("the IPv6 hairpin neighbour left: %q", out)
			}
			return nil
		})
		// IPv4 is untouched: the Service CIDR route, and a ClusterIP works.
		if out := owned("-4"); !strings.Contains(out, controlplane.ServiceCIDR) {
			t.Errorf("IPv4 routes after going IPv4-only: %q, want the Service CIDR %s", out, controlplane.ServiceCIDR)
		}
		eventually(t, "the IPv4 ClusterIP from a pod of node-1", func() error {
			_, _, err := who(clients[0].NetNS, "tcp", ip4, 90)
			return err
		})
	})
}
