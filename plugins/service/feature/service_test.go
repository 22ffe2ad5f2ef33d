package feature

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"switchyard.dev/switchyard/plugins/service/flows"
	"switchyard.dev/switchyard/plugins/service/hostnet"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

func ptr[T any](v T) *T { return &v }

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(nil)
	if err != nil || c.Gateway != DefaultGateway || c.cidrs[0].String() != DefaultServiceCIDR || c.hairpin != flows.DefaultHairpinIP || c.ipv6 {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	for _, tc := range []struct{ in, key string }{
		{`{"serviceCIDRs": ["10.96.0.0/33"]}`, "serviceCIDRs"},
		{`{"serviceCIDRs": ["::ffff:10.96.0.0/108"]}`, "serviceCIDRs"},
		{`{"hairpinIP": "10.0.0.1"}`, "hairpinIP"},
		{`{"gateway": 5}`, "service config"},
		{`{"hairpinIPv6": "10.0.0.1"}`, "hairpinIPv6: \"10.0.0.1\" is not an IPv6 address"},
		{`{"hairpinIPv6": "fe80::fd"}`, "hairpinIPv6: fe80::fd is not a unique local address"},
		{`{"nodePortIPv6": "2001:db8::1"}`, "nodePortIPv6: 2001:db8::1 is not a unique local address"},
		{`{"nodePortIPv6": "fd00:5ce::fd"}`, "nodePortIPv6: fd00:5ce::fd is hairpinIPv6 too"},
		{`{"serviceCIDRs": ["fd00:5ce::/64"]}`, "hairpinIPv6: fd00:5ce::fd is inside serviceCIDR fd00:5ce::/64"},
	} {
		if _, err := ParseConfig([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: got %v, want an error with %q", tc.in, err, tc.key)
		}
	}
	for _, tc := range []struct {
		name, in string
		ipv6     bool
		hairpin6 string
		routed   [2]string // IPv4, IPv6
	}{
		{"IPv4 only", `{"serviceCIDRs": ["10.96.0.0/16"]}`, false, "fd00:5ce::fd", [2]string{"[10.96.0.0/16 169.254.0.252/32]", "[]"}},
		{"dual-stack", `{"serviceCIDRs": ["10.96.0.0/16", "fd00:10:96::/108"]}`, true, "fd00:5ce::fd",
			[2]string{"[10.96.0.0/16 169.254.0.252/32]", "[fd00:10:96::/108 fd00:5ce::fc/128]"}},
		{"IPv6 only, own addresses", `{"serviceCIDRs": ["fd00:10:96::/108"], "hairpinIPv6": "fd99::1", "nodePortIPv6": "fd99::2"}`, true, "fd99::1",
			[2]string{"[169.254.0.252/32]", "[fd00:10:96::/108 fd99::2/128]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if c.ipv6 != tc.ipv6 || c.hop(true).String() != tc.hairpin6 || c.hop(false) != flows.DefaultHairpinIP {
				t.Errorf("ipv6 %v, hops %s and %s; want %v, %s", c.ipv6, c.hop(false), c.hop(true), tc.ipv6, tc.hairpin6)
			}
			if got := [2]string{fmt.Sprint(c.routed(false)), fmt.Sprint(c.routed(true))}; got != tc.routed {
				t.Errorf("routed %v, want %v", got, tc.routed)
			}
		})
	}
}

// slice builds an EndpointSlice of svc with one port and endpoints
// given as address → conditions.
func slice(name, svc, port string, num int32, eps map[string]discoveryv1.EndpointConditions) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr(port), Port: ptr(num), Protocol: ptr(corev1.ProtocolTCP)}}}
	for a, c := range eps {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: c})
	}
	return es
}

var (
	ready       = discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true)}
	terminating = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
	notReady    = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(false)}
)

func TestEndpointsOf(t *testing.T) {
	local := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}
	sp := corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}
	ep := func(a string, port uint16) flows.Endpoint {
		ip := netip.MustParseAddr(a)
		return flows.Endpoint{IP: ip, Port: port, Local: local[0].Contains(ip)}
	}
	tests := []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   []flows.Endpoint
	}{
		{"ready only, sorted, local marked",
			[]*discoveryv1.EndpointSlice{slice("a", "web", "http", 8080, map[string]discoveryv1.EndpointConditions{
				"10.244.2.5": ready, "10.244.1.5": ready, "10.244.3.5": notReady, "10.244.3.6": terminating})},
			[]flows.Endpoint{ep("10.244.1.5", 8080), ep("10.244.2.5", 8080)}},
		{"serving terminating when none is ready",
			[]*discoveryv1.EndpointSlice{slice("a", "web", "http", 8080, map[string]discoveryv1.EndpointConditions{
				"10.244.3.5": notReady, "10.244.3.6": terminating})},
			[]flows.Endpoint{ep("10.244.3.6", 8080)}},
		{"named target port differs per slice; other port names ignored",
			[]*discoveryv1.EndpointSlice{
				slice("a", "web", "http", 8080, map[string]discoveryv1.EndpointConditions{"10.244.2.5": ready}),
				slice("b", "web", "http", 9090, map[string]discoveryv1.EndpointConditions{"10.244.2.6": ready}),
				slice("c", "web", "metrics", 9100, map[string]discoveryv1.EndpointConditions{"10.244.2.7": ready})},
			[]flows.Endpoint{ep("10.244.2.5", 8080), ep("10.244.2.6", 9090)}},
		{"nil conditions count as ready", []*discoveryv1.EndpointSlice{slice("a", "web", "http", 8080, map[string]discoveryv1.EndpointConditions{"10.244.2.5": {}})},
			[]flows.Endpoint{ep("10.244.2.5", 8080)}},
		{"no slices", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, endpointsOf(sp, tt.slices, local, false), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
				t.Errorf("endpoints (-want +got):\n%s", d)
			}
		})
	}
}

// TestSlim: the informers keep what the plugin reads (the Service's spec,
// versions, the slice's Service label, endpoints and conditions) and drop
// the rest.
func TestSlim(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u", ResourceVersion: "7", ManagedFields: mf,
		Annotations: map[string]string{"a": "b"}, Labels: map[string]string{"app": "web"}}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1"}}
	es := slice("web-1", "web", "http", 8080, map[string]discoveryv1.EndpointConditions{"10.244.1.5": ready})
	es.ResourceVersion, es.ManagedFields, es.Labels["endpointslice.kubernetes.io/managed-by"] = "8", mf, "endpointslice-controller.k8s.io"
	es.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: "web-1"}
	if _, err := slim(svc); err != nil {
		t.Fatal(err)
	}
	if _, err := slim(es); err != nil {
		t.Fatal(err)
	}
	if svc.ManagedFields != nil || svc.Annotations != nil || svc.Labels != nil || svc.UID != "u" || svc.ResourceVersion != "7" || svc.Spec.ClusterIP != "10.96.0.1" {
		t.Errorf("slim Service: %+v", svc.ObjectMeta)
	}
	if es.ManagedFields != nil || len(es.Labels) != 1 || sliceKey(es) != "default/web" || es.ResourceVersion != "8" || es.Endpoints[0].TargetRef != nil ||
		len(endpointsOf(corev1.ServicePort{Name: "http", Port: 80}, []*discoveryv1.EndpointSlice{es}, nil, false)) != 1 {
		t.Errorf("slim EndpointSlice: %+v", es)
	}
}

// testService is a plugin on informer caches the test fills, with h as
// its host and no kernel NodePort table.
func testService(h sdk.Host) (*Service, cache.Indexer, cache.Indexer) {
	svcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	sl := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{byService: sliceService})
	return newTestService(h, svcs, sl), svcs, sl
}

func newTestService(h sdk.Host, svcs, sl cache.Indexer) *Service {
	s := New()
	s.applyNodePortsFn = func([]netip.Addr, netip.Addr, netip.Addr, []hostnet.NodePort) error { return nil }
	s.host, s.svcs, s.slices = h, listersv1.NewServiceLister(svcs), sl
	s.local = flows.Local{DNATZone: 5, SNATZone: 6, HairpinIP: flows.DefaultHairpinIP}
	return s
}

// recordingHost records the batches a feature applies.
type recordingHost struct {
	sdk.Host
	batches []*flow.Batch
}

func (h *recordingHost) Apply(_ context.Context, b *flow.Batch) error {
	h.batches = append(h.batches, b)
	return nil
}

// TestSyncIsIncremental: an endpoint change of one Service rewrites that
// Service's group and its changed flows only; a deleted Service loses all
// of its own.
func TestSyncIsIncremental(t *testing.T) {
	ctx := context.Background()
	h := &recordingHost{}
	s, svcs, sl := testService(h)
	for i, name := range []string{"web", "api"} {
		svcs.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0." + string(rune('1'+i)), Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})
		sl.Add(slice(name, name, "http", 8080, map[string]discoveryv1.EndpointConditions{"10.244.2.5": ready, "10.244.3.5": ready}))
		if err := s.sync(ctx, "default/"+name); err != nil {
			t.Fatal(err)
		}
	}
	// One endpoint of web leaves.
	sl.Update(slice("web", "web", "http", 8080, map[string]discoveryv1.EndpointConditions{"10.244.2.5": ready}))
	if err := s.sync(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, o := range h.batches[len(h.batches)-1].Ops {
		ops = append(ops, o.String())
	}
	web := s.installed["default/web"].ports[0].Group
	want := []string{
		fmt.Sprintf("modify group_id=%d", web) + ",type=select,selection_method=dp_hash,bucket=weight:100,actions=load:0xaf40205->reg:service.ep_ip,load:0x1f90->reg:service.ep_port,resubmit(,@service.dnat)",
		"delete table=service.dnat, priority=200, tcp,reg:service.ep_ip=0xaf40305,reg:service.ep_port=0x1f90,reg:service.svc=" + fmt.Sprintf("%#x", web) + " actions=ct(commit,table=@next,zone=5,nat(dst=10.244.3.5:8080),exec(set_field:0x1/0x7->ct_mark))",
	}
	if d := cmp.Diff(want, ops); d != "" {
		t.Errorf("the endpoint change's batch (-want +got):\n%s", d)
	}
	// Nothing changed: nothing is sent.
	n := len(h.batches)
	if err := s.sync(ctx, "default/api"); err != nil || len(h.batches) != n {
		t.Errorf("a sync without change sent %d batches (%v)", len(h.batches)-n, err)
	}
	// api is deleted: its group and every flow of it go, web's stay.
	svcs.Delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default"}})
	if err := s.sync(ctx, "default/api"); err != nil {
		t.Fatal(err)
	}
	for _, o := range h.batches[len(h.batches)-1].Ops {
		if o.Kind != flow.OpDelete || (o.Flow != nil && o.Flow.Tag != flows.ServiceTag("default/api")) {
			t.Errorf("deleting api: unexpected op %s", o)
		}
	}
	if _, ok := s.installed["default/api"]; ok {
		t.Errorf("api still recorded as installed")
	}
}

// TestSyncSkipsAnUnchangedSource: a Service whose object, slices and
// node facts are the versions it was installed from is not derived again
// (the informers' initial adds queue every Service once more after the
// first install); a newer slice, or new node facts, are.
func TestSyncSkipsAnUnchangedSource(t *testing.T) {
	ctx := context.Background()
	h := &recordingHost{}
	s, svcs, sl := testService(h)
	svcs.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1", ResourceVersion: "10"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})
	versioned := func(rv string, eps map[string]discoveryv1.EndpointConditions) *discoveryv1.EndpointSlice {
		es := slice("web", "web", "http", 8080, eps)
		es.ResourceVersion = rv
		return es
	}
	sl.Add(versioned("11", map[string]discoveryv1.EndpointConditions{"10.244.2.5": ready}))
	sync := func(what string, wantBatch bool) {
		t.Helper()
		n := len(h.batches)
		if err := s.sync(ctx, "default/web"); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := len(h.batches) > n; got != wantBatch {
			t.Errorf("%s: sent a batch %v, want %v", what, got, wantBatch)
		}
	}
	sync("first install", true)
	// Different content under the same versions cannot come from an
	// apiserver; it shows that the sync did not look past the versions.
	sl.Update(versioned("11", map[string]discoveryv1.EndpointConditions{"10.244.2.6": ready}))
	sync("same versions", false)
	sync("newer slice", false) // still 11: skipped again
	sl.Update(versioned("12", map[string]discoveryv1.EndpointConditions{"10.244.2.6": ready}))
	sync("newer slice", true)
	if err := s.NodeFactsChanged(ctx, sdk.NodeFactsChangedRequest{New: sdk.NodeFacts{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")}}}, nil); err != nil {
		t.Fatal(err)
	}
	sync("new node facts (the endpoint is local now)", true)
	sync("after the facts change", false)
}

// flushingHost also records conntrack flushes.
type flushingHost struct {
	recordingHost
	flushes []sdk.ConntrackFilter
}

func (h *flushingHost) FlushConntrack(_ context.Context, f sdk.ConntrackFilter) error {
	h.flushes = append(h.flushes, f)
	return nil
}

// TestDepartedUDPEndpointFlushed: an endpoint leaving a UDP port flushes
// exactly that port's entries towards it; a TCP port's do not.
func TestDepartedUDPEndpointFlushed(t *testing.T) {
	ctx := context.Background()
	h := &flushingHost{}
	s, svcs, sl := testService(h)
	svcs.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "dns", Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}}}})
	both := func(eps map[string]discoveryv1.EndpointConditions) *discoveryv1.EndpointSlice {
		es := slice("dns", "dns", "dns", 5353, eps)
		es.Ports[0].Protocol = ptr(corev1.ProtocolUDP)
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptr("dns-tcp"), Port: ptr(int32(5353)), Protocol: ptr(corev1.ProtocolTCP)})
		return es
	}
	sl.Add(both(map[string]discoveryv1.EndpointConditions{"10.244.2.5": ready, "10.244.3.5": ready}))
	if err := s.sync(ctx, "default/dns"); err != nil {
		t.Fatal(err)
	}
	sl.Update(both(map[string]discoveryv1.EndpointConditions{"10.244.2.5": ready}))
	if err := s.sync(ctx, "default/dns"); err != nil {
		t.Fatal(err)
	}
	want := []sdk.ConntrackFilter{{Zone: 5, Protocol: flows.ProtoUDP,
		Orig:  sdk.ConntrackTuple{Dst: netip.MustParseAddr("10.96.0.10"), DstPort: 53},
		Reply: sdk.ConntrackTuple{Src: netip.MustParseAddr("10.244.3.5"), SrcPort: 5353}}}
	if d := cmp.Diff(want, h.flushes, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("flushes (-want +got):\n%s", d)
	}
}

// BenchmarkSyncAll is the plugin's side of a cold start: deriving and
// batching 1,000 Services of 10 endpoints each (the host's side, the
// switch's and the wire are not in it).
func BenchmarkSyncAll(b *testing.B) {
	_, svcs, sl := testService(nil)
	eps := map[string]discoveryv1.EndpointConditions{}
	for i := range 10 {
		eps[fmt.Sprintf("10.244.%d.%d", 1+i%2, 10+i)] = ready
	}
	for i := range 1000 {
		name := fmt.Sprintf("svc-%04d", i)
		svcs.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", ResourceVersion: "1"},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}})
		sl.Add(slice(name, name, "http", 8080, eps))
	}
	for b.Loop() {
		s := newTestService(&recordingHost{}, svcs, sl)
		s.podCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}
		if _, err := s.syncAll(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLocalAddressRemotePods: a Local NodePort gets a companion port for
// the pods of other nodes once a node event names their pod CIDRs (every
// endpoint, SNATed), and loses it when that node goes; Services without a
// Local address are not touched by node events.
func TestLocalAddressRemotePods(t *testing.T) {
	ctx := context.Background()
	h := &recordingHost{}
	s, svcs, sl := testService(h)
	s.cfg.nodePort = flows.DefaultNodePortIP
	s.podCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}
	for _, p := range []corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyLocal, corev1.ServiceExternalTrafficPolicyCluster} {
		name := "np-" + strings.ToLower(string(p))
		svcs.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", ResourceVersion: "1"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ExternalTrafficPolicy: p, ClusterIP: "10.96.0.9",
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}}}})
		es := slice(name, name, "http", 8080, map[string]discoveryv1.EndpointConditions{"10.244.1.5": ready, "10.244.2.5": ready})
		es.ResourceVersion = "1"
		sl.Add(es)
		if err := s.sync(ctx, "default/"+name); err != nil {
			t.Fatal(err)
		}
	}
	s.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer s.queue.ShutDown()
	companion := func(key string) *flows.Port {
		for _, p := range s.installed[key].ports {
			if len(p.Sources) > 0 {
				return &p
			}
		}
		return nil
	}
	if companion("default/np-local") != nil {
		t.Fatalf("a companion port before any node event")
	}
	node2 := sdk.NodeInfo{Name: "node-2", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("fd00:2::/64")}}
	if err := s.NodeEvent(ctx, sdk.NodeEventRequest{Kind: sdk.NodeAdded, Node: node2}, nil); err != nil {
		t.Fatal(err)
	}
	if n := s.queue.Len(); n != 1 {
		t.Errorf("a node event queued %d Services, want 1 (np-local)", n)
	}
	if err := s.sync(ctx, "default/np-local"); err != nil {
		t.Fatal(err)
	}
	c := companion("default/np-local")
	if c == nil {
		t.Fatalf("no companion port after node-2's pod CIDRs arrived: %+v", s.installed["default/np-local"].ports)
	}
	if !c.SNAT || len(c.Endpoints) != 2 || len(c.Sources) != 1 || c.Sources[0].String() != "10.244.2.0/24" || c.Port != 30080 {
		t.Errorf("companion port %+v; want SNAT, both endpoints, sources [10.244.2.0/24], port 30080", *c)
	}
	if err := s.NodeEvent(ctx, sdk.NodeEventRequest{Kind: sdk.NodeDeleted, Node: sdk.NodeInfo{Name: "node-2"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.sync(ctx, "default/np-local"); err != nil {
		t.Fatal(err)
	}
	if c := companion("default/np-local"); c != nil {
		t.Errorf("companion port %+v left after node-2 went", *c)
	}
}

// TestDualStackService: each ClusterIP of a dual-stack Service is balanced
// over the endpoints of its own family (the IPv6 ones in their own
// EndpointSlice), with a NodePort for each family's node addresses; an
// IPv6 UDP endpoint that leaves has its conntrack entries flushed; with an
// IPv4-only config the IPv6 ClusterIP is left alone.
func TestDualStackService(t *testing.T) {
	ctx := context.Background()
	h := &flushingHost{}
	s, svcs, sl := testService(&h.recordingHost)
	s.host = h
	var handed []hostnet.NodePort
	var vips []netip.Addr
	s.applyNodePortsFn = func(_ []netip.Addr, vip, vip6 netip.Addr, ps []hostnet.NodePort) error {
		handed, vips = ps, []netip.Addr{vip, vip6}
		return nil
	}
	cfg, err := ParseConfig([]byte(`{"serviceCIDRs": ["10.96.0.0/16", "fd00:10:96::/108"]}`))
	if err != nil {
		t.Fatal(err)
	}
	s.cfg = cfg
	s.podCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
	svcs.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10", "fd00:10:96::a"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, ExternalIPs: []string{"198.18.0.50", "fd00:198:18::50"},
			Ports: []corev1.ServicePort{{Name: "dns", Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP}}}})
	v4 := slice("web-v4", "web", "dns", 5353, map[string]discoveryv1.EndpointConditions{"10.244.1.5": ready, "10.244.2.5": ready})
	v4.Ports[0].Protocol = ptr(corev1.ProtocolUDP)
	v6 := func(eps map[string]discoveryv1.EndpointConditions) *discoveryv1.EndpointSlice {
		es := slice("web-v6", "web", "dns", 5353, eps)
		es.AddressType, es.Ports[0].Protocol = discoveryv1.AddressTypeIPv6, ptr(corev1.ProtocolUDP)
		return es
	}
	sl.Add(v4)
	sl.Add(v6(map[string]discoveryv1.EndpointConditions{"fd00:10:244:1::5": ready, "fd00:10:244:2::5": ready}))
	if err := s.sync(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	type summary struct {
		Name, Addr string
		Endpoints  []string
	}
	var got []summary
	for _, p := range s.installed["default/web"].ports {
		var eps []string
		for _, e := range p.Endpoints {
			eps = append(eps, netip.AddrPortFrom(e.IP, e.Port).String())
		}
		got = append(got, summary{p.Name, p.ClusterIP.String(), eps})
	}
	four := []string{"10.244.1.5:5353", "10.244.2.5:5353"}
	six := []string{"[fd00:10:244:1::5]:5353", "[fd00:10:244:2::5]:5353"}
	want := []summary{
		{"dns", "10.96.0.10", four},
		{"dns@nodeport", "169.254.0.252", four},
		{"dns@198.18.0.50", "198.18.0.50", four},
		{"dns", "fd00:10:96::a", six},
		{"dns@nodeport6", "fd00:5ce::fc", six},
		{"dns@fd00:198:18::50", "fd00:198:18::50", six},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ports (-want +got):\n%s", d)
	}
	wantNP := []hostnet.NodePort{{Proto: flows.ProtoUDP, Port: 30053}, {Proto: flows.ProtoUDP, Port: 30053, IPv6: true}}
	if d := cmp.Diff(wantNP, handed); d != "" || vips[1] != flows.DefaultNodePortIPv6 {
		t.Errorf("NodePorts handed to the kernel (-want +got):\n%s (addresses %v)", d, vips)
	}
	if ext := s.installed["default/web"].external; len(ext) != 2 || ext[1] != netip.MustParseAddr("fd00:198:18::50") {
		t.Errorf("external routes %v, want both families", ext)
	}

	// One IPv6 endpoint leaves: its entries through the IPv6 addresses go.
	sl.Update(v6(map[string]discoveryv1.EndpointConditions{"fd00:10:244:1::5": ready}))
	if err := s.sync(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	var flushed []string
	for _, f := range h.flushes {
		flushed = append(flushed, fmt.Sprintf("%s -> %s", f.Orig.Dst, netip.AddrPortFrom(f.Reply.Src, f.Reply.SrcPort)))
	}
	wantFlushed := []string{
		"fd00:10:96::a -> [fd00:10:244:2::5]:5353",
		"fd00:5ce::fc -> [fd00:10:244:2::5]:5353",
		"fd00:198:18::50 -> [fd00:10:244:2::5]:5353",
	}
	if d := cmp.Diff(wantFlushed, flushed); d != "" {
		t.Errorf("conntrack flushes (-want +got):\n%s", d)
	}

	// Without an IPv6 serviceCIDR the IPv6 addresses are not balanced.
	s.cfg, _ = ParseConfig(nil)
	svcs.Update(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIPs: []string{"fd00:10:96::a"}, Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}})
	if err := s.sync(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	if ps := s.installed["default/web"].ports; len(ps) != 0 {
		t.Errorf("an IPv4-only plugin balances %+v", ps)
	}
}
