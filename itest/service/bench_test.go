package service

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// connRate opens TCP connections to ip:port from ns back to back for d
// (connect, 1-byte request, echo, close) and returns connections per
// second.
func connRate(ns string, ip net.IP, port int, d time.Duration) (float64, error) {
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	n := 0
	start := time.Now()
	buf := []byte{0}
	for time.Since(start) < d {
		c, err := netns.Dial(ns, "tcp", addr, 3*time.Second)
		if err != nil {
			return 0, err
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Write(buf); err == nil {
			_, err = io.ReadFull(c, buf)
		}
		c.Close()
		if err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// manyServices creates n Services (TCP port 70 to longPort) with one
// EndpointSlice each listing eps, from workers in parallel.
func manyServices(b testing.TB, cs kubernetes.Interface, n int, eps []*cluster.Pod) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name := fmt.Sprintf("bulk-%05d", i)
				_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "long", Protocol: corev1.ProtocolTCP, Port: 70, TargetPort: intstr.FromInt32(longPort)}}}},
					metav1.CreateOptions{})
				if err == nil {
					es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
						AddressType: discoveryv1.AddressTypeIPv4,
						Ports:       []discoveryv1.EndpointPort{{Name: ptr("long"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(longPort))}}}
					for _, p := range eps {
						es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{p.IP().String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
					}
					_, err = cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{})
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatalf("creating Services: %v", err)
	default:
	}
}

// serviceFlows counts the flows in br-int of n whose cookie is the
// service plugin's.
func serviceFlows(t testenv.T, n *cluster.Node) int {
	out := n.OVS.Ofctl(t, "-O", "OpenFlow15", "dump-flows", "br-int", "--no-stats")
	c := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "reg") && strings.Contains(l, "ct(commit") && strings.Contains(l, "nat(dst=") {
			c++
		}
	}
	return c
}

// BenchmarkConnRate measures, in one run on one 2-node cluster, new TCP
// connections per second from a pod to a ClusterIP with 10 endpoints (5 on
// each node) with 1 Service present, then with 10,000 Services of 10
// endpoints each, and reports the ratio (target: ≥ 0.95). It also reports
// how long it took from the first create until node-1's switch held every
// DNAT flow (create+install-s), which the apiserver's create rate
// dominates here. A cold start at 10,000 Services (kill -9, a new
// incarnation) is not measured: the host's Synced did not return within
// minutes at that size (see the report of issue 14). The kube-proxy
// nftables baseline of issue 14 is not measured here yet. Run with
// -benchtime=1x -count=N.
func BenchmarkConnRate(b *testing.B) {
	testenv.RequireRoot(b)
	e := start(b, 2)
	n1, n2 := e.c.Nodes[0], e.c.Nodes[1]
	var eps []*cluster.Pod
	for i := range 10 {
		n := []*cluster.Node{n1, n2}[i%2]
		p := e.c.AddPod(b, cluster.PodSpec{Name: fmt.Sprintf("b-%d", i), Namespace: ns, Node: n})
		longEcho(b, p.NetNS)
		eps = append(eps, p)
	}
	c := e.client(b, "c-1", n1)
	ip := e.service(b, "target", []svcPort{{"long", corev1.ProtocolTCP, 70, longPort}})
	e.endpoints(b, "target", []svcPort{{"long", corev1.ProtocolTCP, 70, longPort}}, eps...)
	if err := testenv.Eventually("the Service", 20*time.Second, 100*time.Millisecond, func() error {
		_, err := connRate(c.NetNS, ip, 70, 10*time.Millisecond)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	const d = 3 * time.Second
	var one, many []float64
	for range b.N {
		r, err := connRate(c.NetNS, ip, 70, d)
		if err != nil {
			b.Fatal(err)
		}
		one = append(one, r)
	}
	cfg := *e.cp.Config
	cfg.QPS, cfg.Burst = 2000, 4000
	cs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	const bulk = 9999
	created := time.Now()
	manyServices(b, cs, bulk, eps)
	b.Logf("created %d Services and EndpointSlices in %s", bulk, time.Since(created).Round(time.Millisecond))
	want := 10 * (bulk + 1)
	if err := testenv.Eventually("10,000 Services on node-1", 15*time.Minute, 5*time.Second, func() error {
		if got := serviceFlows(b, n1); got < want {
			return fmt.Errorf("%d of %d dnat flows", got, want)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	install := time.Since(created)
	b.Logf("10,000 Services installed incrementally %s after their creation began", install.Round(time.Millisecond))
	for range b.N {
		r, err := connRate(c.NetNS, ip, 70, d)
		if err != nil {
			b.Fatal(err)
		}
		many = append(many, r)
	}
	a, m := mean(one), mean(many)
	b.ReportMetric(a, "conns/s-1svc")
	b.ReportMetric(m, "conns/s-10ksvc")
	b.ReportMetric(m/a, "ratio-10k/1")
	b.ReportMetric(install.Seconds(), "create+install-s-10ksvc")
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
