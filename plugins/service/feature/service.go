package feature

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"switchyard.dev/switchyard/plugins/internal/clusterclient"
	"switchyard.dev/switchyard/plugins/service/flows"
	"switchyard.dev/switchyard/plugins/service/hostnet"
	"switchyard.dev/switchyard/plugins/service/reject"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Version of the plugin, reported in Describe.
const Version = "0.1.0"

// Defaults.
const (
	DefaultGateway     = "sy-gw0"
	DefaultServiceCIDR = "10.96.0.0/12"
)

// Config is the service plugin's section of the agent config.
type Config struct {
	// ServiceCIDRs are the ClusterIP ranges the node routes into br-int.
	ServiceCIDRs []string `json:"serviceCIDRs,omitempty"`
	// Gateway is podnet's gateway device.
	Gateway string `json:"gateway,omitempty"`
	// HairpinIP is the source of hairpin connections and the next hop of
	// the Service CIDR route (a link-local address nobody owns).
	HairpinIP string `json:"hairpinIP,omitempty"`
	// NodePortIP is where the node's kernel sends NodePort traffic into
	// br-int (a link-local address nobody owns).
	NodePortIP string `json:"nodePortIP,omitempty"`
	// HairpinIPv6 is hairpinIP for IPv6 Services (default fd00:5ce::fd),
	// used once a serviceCIDR is IPv6: a unique local address (fc00::/7)
	// nobody owns, outside the serviceCIDRs.
	HairpinIPv6 string `json:"hairpinIPv6,omitempty"`
	// NodePortIPv6 is nodePortIP for IPv6 NodePorts (default fd00:5ce::fc):
	// a unique local address nobody owns, not hairpinIPv6.
	NodePortIPv6 string `json:"nodePortIPv6,omitempty"`
	// StateDir is accepted for symmetry with the other plugins; the
	// plugin keeps no state: the apiserver is its record.
	StateDir string `json:"stateDir,omitempty"`

	cidrs    []netip.Prefix
	hairpin  netip.Addr
	nodePort netip.Addr
	// ipv6: a serviceCIDR is IPv6, so IPv6 Services are balanced, through
	// hairpin6 and nodePort6.
	ipv6                bool
	hairpin6, nodePort6 netip.Addr
}

// ParseConfig reads and checks the config section; an error names the key.
func ParseConfig(b []byte) (Config, error) {
	c := Config{}
	if len(b) > 0 && string(b) != "null" {
		if err := json.Unmarshal(b, &c); err != nil {
			return c, fmt.Errorf("service config: %w", err)
		}
	}
	if c.Gateway == "" {
		c.Gateway = DefaultGateway
	}
	if len(c.ServiceCIDRs) == 0 {
		c.ServiceCIDRs = []string{DefaultServiceCIDR}
	}
	for _, s := range c.ServiceCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return c, fmt.Errorf("service config serviceCIDRs: %q is not a CIDR (e.g. 10.96.0.0/12 or fd00:10:96::/108)", s)
		}
		c.cidrs = append(c.cidrs, p.Masked())
		c.ipv6 = c.ipv6 || p.Addr().Is6()
	}
	c.hairpin = flows.DefaultHairpinIP
	if c.HairpinIP != "" {
		a, err := netip.ParseAddr(c.HairpinIP)
		if err != nil || !a.Is4() || !a.IsLinkLocalUnicast() {
			return c, fmt.Errorf("service config hairpinIP: %q is not an IPv4 link-local address (169.254.0.0/16)", c.HairpinIP)
		}
		c.hairpin = a
	}
	c.nodePort = flows.DefaultNodePortIP
	if c.NodePortIP != "" {
		a, err := netip.ParseAddr(c.NodePortIP)
		if err != nil || !a.Is4() || !a.IsLinkLocalUnicast() || a == c.hairpin {
			return c, fmt.Errorf("service config nodePortIP: %q is not an IPv4 link-local address (169.254.0.0/16) other than hairpinIP", c.NodePortIP)
		}
		c.nodePort = a
	}
	var err error
	if c.hairpin6, err = c.parseIPv6("hairpinIPv6", c.HairpinIPv6, flows.DefaultHairpinIPv6, netip.Addr{}); err != nil {
		return c, err
	}
	if c.nodePort6, err = c.parseIPv6("nodePortIPv6", c.NodePortIPv6, flows.DefaultNodePortIPv6, c.hairpin6); err != nil {
		return c, err
	}
	return c, nil
}

// ulas are the IPv6 unique local addresses.
var ulas = netip.MustParsePrefix("fc00::/7")

// parseIPv6 reads one of the IPv6 virtual addresses (def when empty): a
// unique local address, not other, and in no Service CIDR. Not a
// link-local one, as for IPv4: a pod holds fe80::/64 on-link, so it would
// solicit a link-local hairpin source on its own link instead of
// answering it through its gateway.
func (c Config) parseIPv6(key, text string, def, other netip.Addr) (netip.Addr, error) {
	a, err := def, error(nil)
	if text != "" {
		a, err = netip.ParseAddr(text)
	}
	switch {
	case err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "":
		return a, fmt.Errorf("service config %s: %q is not an IPv6 address; use a unique local address nobody owns (fc00::/7, e.g. %s)", key, text, def)
	case !ulas.Contains(a):
		return a, fmt.Errorf("service config %s: %s is not a unique local address (fc00::/7); pods would not send it to their gateway if link-local, and a global one may be someone's (e.g. %s)", key, a, def)
	case a == other:
		return a, fmt.Errorf("service config %s: %s is hairpinIPv6 too; give each its own address", key, a)
	}
	for _, p := range c.cidrs {
		if p.Contains(a) {
			return a, fmt.Errorf("service config %s: %s is inside serviceCIDR %s, where ClusterIPs are allocated; set %s to an address outside it", key, a, p, key)
		}
	}
	return a, nil
}

// hop is the next hop of the routes of family ipv6's destinations into
// br-int (a permanent neighbour at the gateway's MAC).
func (c Config) hop(ipv6 bool) netip.Addr {
	if ipv6 {
		return c.hairpin6
	}
	return c.hairpin
}

// routed are the destinations of one family the node sends into br-int:
// the Service CIDRs and the NodePort address; none for IPv6 without an
// IPv6 Service CIDR.
func (c Config) routed(ipv6 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range c.cidrs {
		if p.Addr().Is6() == ipv6 {
			out = append(out, p)
		}
	}
	switch {
	case !ipv6:
		out = append(out, netip.PrefixFrom(c.nodePort, 32))
	case c.ipv6:
		out = append(out, netip.PrefixFrom(c.nodePort6, 128))
	}
	return out
}

// vip6 is the IPv6 NodePort address when IPv6 Services are balanced
// (invalid otherwise: the kernel's ip6 tables are left alone).
func (c Config) vip6() netip.Addr {
	if c.ipv6 {
		return c.nodePort6
	}
	return netip.Addr{}
}

// families are the IP families the plugin balances (false: IPv4).
func (c Config) families() []bool {
	if c.ipv6 {
		return []bool{false, true}
	}
	return []bool{false}
}

// hostPrefix is the prefix of a alone.
func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// Service implements the plugin.
type Service struct {
	log *slog.Logger

	// mu guards everything below; it is held across host calls, so each
	// Service's change is applied whole before the next.
	mu       sync.Mutex
	host     sdk.Host
	cfg      Config
	local    flows.Local
	gw       netlink.Link
	gwMAC    net.HardwareAddr
	podCIDRs []netip.Prefix
	nodeIPs  []netip.Addr
	// nodePorts are the NodePorts the kernel's table holds, as applied.
	nodePorts    []hostnet.NodePort
	nodePortsSet bool
	// extRoutes are the external IPs routed into br-int.
	extRoutes map[netip.Addr]bool
	// applyNodePortsFn is hostnet.ApplyNodePorts (a seam for unit tests,
	// which must not touch the machine's nftables).
	applyNodePortsFn func(nodeIPs []netip.Addr, vip, vip6 netip.Addr, ports []hostnet.NodePort) error
	// installed is what the switch holds, by Service key.
	installed map[string]installed
	// groups allocates group IDs: by port key and back.
	groups   map[string]uint32
	groupKey map[uint32]string
	// peers are the pod CIDRs of the other nodes (IPv6 ones only with IPv6
	// Services), by node name;
	// remotePods all of them, sorted: the pods of other nodes, whom a
	// Local address balances over every endpoint (addRemote).
	peers      map[string][]netip.Prefix
	remotePods []netip.Prefix
	// factsGen counts node-facts changes: part of every Service's
	// source, so a change re-derives them all.
	factsGen uint64

	svcs   listersv1.ServiceLister
	slices cache.Indexer
	queue  workqueue.TypedRateLimitingInterface[string]
	cancel context.CancelFunc
	done   chan struct{}
}

// installed is one Service as the switch holds it.
type installed struct {
	ports  []flows.Port
	flows  []flow.Flow
	groups map[uint32]flow.Group
	// external are the Service's external IPs, routed into br-int.
	external []netip.Addr
	// source names the objects and node facts it was derived from (see
	// sourceOf); a sync whose source is unchanged has nothing to do.
	source string
}

var (
	_ sdk.Feature             = (*Service)(nil)
	_ sdk.Stopper             = (*Service)(nil)
	_ sdk.PacketInHandler     = (*Service)(nil)
	_ sdk.NodeFactsSubscriber = (*Service)(nil)
	_ sdk.NodeEventSubscriber = (*Service)(nil)
)

// New returns an unstarted service plugin.
func New() *Service {
	return &Service{log: slog.Default(), installed: map[string]installed{}, groups: map[string]uint32{}, groupKey: map[uint32]string{},
		applyNodePortsFn: hostnet.ApplyNodePorts, extRoutes: map[netip.Addr]bool{}, peers: map[string][]netip.Prefix{}}
}

// Describe declares the tables, fields and resources.
func (s *Service) Describe(_ context.Context, req sdk.DescribeRequest, resp *sdk.DescribeResponse) error {
	cfg, err := ParseConfig(req.Config)
	if err != nil {
		return err
	}
	resp.Name = "service"
	resp.Version = Version
	resp.Tables = flows.Tables()
	resp.Fields = flows.Fields(cfg.ipv6)
	resp.Resources = flows.Resources()
	return nil
}

// Start installs the node-wide flows and the route to the Service CIDRs,
// then watches Services and EndpointSlices in the background and says
// Synced once every Service is installed.
func (s *Service) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	cfg, err := ParseConfig(req.Config)
	if err != nil {
		return err
	}
	if req.Cluster.APIServer.URL == "" {
		return errors.New("the service plugin watches Services and EndpointSlices, but the agent has no apiserver (set kubeconfig in the agent config)")
	}
	local, err := flows.LocalOf(req.Assignment.Grants, cfg.hairpin)
	if err != nil {
		return err
	}
	gw, err := hostnet.Gateway(cfg.Gateway, 10*time.Second)
	if err != nil {
		return err
	}
	client, err := clusterclient.Clientset(req.Cluster, "switchyard-service")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	local.NodePortIP = cfg.nodePort
	if cfg.ipv6 {
		local.HairpinIP6, local.NodePortIP6 = cfg.hairpin6, cfg.nodePort6
	}
	s.host, s.log, s.cfg, s.local, s.gw = req.Host, req.Host.Logger(), cfg, local, gw
	s.setFacts(req.Node)
	if err := s.installMeter(ctx); err != nil {
		return err
	}
	if err := s.host.Apply(ctx, flow.NewBatch().AddFlows(flows.StaticFlows(s.local)...)); err != nil {
		return fmt.Errorf("installing the service plugin's node-wide flows: %w", err)
	}
	for _, v6 := range cfg.families() {
		if err := hostnet.Install(gw, cfg.hop(v6), cfg.routed(v6)); err != nil {
			return err
		}
	}
	if err := s.sweepRoutes(); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(slim))
	svcInf := factory.Core().V1().Services()
	sliceInf := factory.Discovery().V1().EndpointSlices()
	if err := sliceInf.Informer().AddIndexers(cache.Indexers{byService: sliceService}); err != nil {
		return err
	}
	s.svcs, s.slices = svcInf.Lister(), sliceInf.Informer().GetIndexer()
	s.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "service"})
	enqueue := func(key string) {
		if key != "" {
			s.queue.Add(key)
		}
	}
	svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { enqueue(objectKey(o)) },
		UpdateFunc: func(_, o any) { enqueue(objectKey(o)) },
		DeleteFunc: func(o any) { enqueue(objectKey(o)) },
	})
	sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { enqueue(sliceKey(o)) },
		UpdateFunc: func(old, o any) {
			enqueue(sliceKey(o))
			if k := sliceKey(old); k != sliceKey(o) {
				enqueue(k)
			}
		},
		DeleteFunc: func(o any) { enqueue(sliceKey(o)) },
	})
	run, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	factory.Start(run.Done())
	go s.run(run, factory, svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced)
	s.log.Info("service plugin started", "service_cidrs", cfg.cidrs, "hairpin_ip", cfg.hairpin, "ipv6", cfg.ipv6, "hairpin_ipv6", local.HairpinIP6, "gateway", cfg.Gateway,
		"dnat_zone", local.DNATZone, "snat_zone", local.SNATZone, "ct_mark_offset", local.MarkOffset)
	return nil
}

// installMeter adds the reject meter, or, when an earlier incarnation
// left it on the switch (the host refuses to add it again), rewrites it.
func (s *Service) installMeter(ctx context.Context) error {
	err := s.host.Apply(ctx, flow.NewBatch().AddMeter(flows.RejectMeter()))
	if err == nil {
		return nil
	}
	if merr := s.host.Apply(ctx, flow.NewBatch().ModifyMeter(flows.RejectMeter())); merr != nil {
		return fmt.Errorf("installing the reject meter: %w (and rewriting it: %v)", err, merr)
	}
	return nil
}

// slim keeps of a Service or EndpointSlice only what the plugin reads,
// so the informers' caches do not hold managed fields, annotations, other
// labels or the endpoints' target references. (At 10,000 Services the
// plugin's RSS stayed about 380 MiB with it: most of it is the installed
// flows and the batches in flight, not the cache.) Resource versions and
// UIDs stay (sourceOf reads them).
func slim(o any) (any, error) {
	switch v := o.(type) {
	case *corev1.Service:
		v.ManagedFields, v.Annotations, v.Labels = nil, nil, nil
	case *discoveryv1.EndpointSlice:
		v.ManagedFields, v.Annotations = nil, nil
		if name, ok := v.Labels[discoveryv1.LabelServiceName]; ok {
			v.Labels = map[string]string{discoveryv1.LabelServiceName: name}
		} else {
			v.Labels = nil
		}
		for i := range v.Endpoints {
			v.Endpoints[i].TargetRef, v.Endpoints[i].Hints, v.Endpoints[i].DeprecatedTopology = nil, nil, nil
		}
	}
	return o, nil
}

const byService = "service"

// sliceService indexes an EndpointSlice by the Service it belongs to.
func sliceService(o any) ([]string, error) {
	if k := sliceKey(o); k != "" {
		return []string{k}, nil
	}
	return nil, nil
}

func sliceKey(o any) string {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	es, ok := o.(*discoveryv1.EndpointSlice)
	if !ok {
		return ""
	}
	name := es.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return ""
	}
	return es.Namespace + "/" + name
}

func objectKey(o any) string {
	k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(o)
	if err != nil {
		return ""
	}
	return k
}

// run waits for the informers, installs every Service, says Synced, then
// syncs Services as they change.
func (s *Service) run(ctx context.Context, factory informers.SharedInformerFactory, synced ...cache.InformerSynced) {
	defer close(s.done)
	defer factory.Shutdown()
	defer s.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	start := time.Now()
	n, err := s.syncAll(ctx)
	if err != nil {
		s.log.Error("installing the Services failed; retrying each one", "error", err)
	}
	if err := s.host.Synced(ctx); err != nil {
		s.log.Error("could not tell the host the plugin is synced", "error", err)
	}
	s.log.Info("services installed", "services", n, "took", time.Since(start).String())
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	for s.work(ctx) {
	}
}

func (s *Service) work(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	if err := s.sync(ctx, key); err != nil {
		s.log.Warn("service sync failed; retrying", "service", key, "error", err)
		s.queue.AddRateLimited(key)
		return true
	}
	s.queue.Forget(key)
	return true
}

// maxOps bounds the initial batches well inside the host's batch limit.
const maxOps = 8000

// syncAll installs every Service in batches of whole Services.
func (s *Service) syncAll(ctx context.Context) (int, error) {
	all, err := s.svcs.List(labels.Everything())
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := flow.NewBatch()
	var pending map[string]installed = map[string]installed{}
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		if err := s.host.Apply(ctx, b); err != nil {
			for k := range pending {
				s.queue.Add(k)
			}
			pending, b = map[string]installed{}, flow.NewBatch()
			return err
		}
		maps.Copy(s.installed, pending)
		pending, b = map[string]installed{}, flow.NewBatch()
		return nil
	}
	var errs []error
	for _, svc := range all {
		key := svc.Namespace + "/" + svc.Name
		sl := s.slicesOf(key)
		want := s.desired(key, svc, sl, s.sourceOf(svc, sl))
		s.diff(b, s.installed[key], want)
		pending[key] = want
		if b.Len() >= maxOps {
			errs = append(errs, flush())
		}
	}
	errs = append(errs, flush(), s.applyNodePorts(), s.hostRoutes())
	return len(all), errors.Join(errs...)
}

// sweepRoutes takes over the routes an earlier incarnation left on the
// gateway device: a host route of a balanced family may be an external
// IP still served, so it joins extRoutes, and the first full sync keeps
// or removes it; any other route that is not one Install just made (a
// family or Service CIDR the config no longer has, an earlier next hop's)
// is removed now, as is the neighbour of a family no longer balanced.
func (s *Service) sweepRoutes() error {
	owned, err := hostnet.Owned(s.gw)
	if err != nil {
		return err
	}
	keep := map[netip.Prefix]bool{}
	balanced := map[bool]bool{}
	for _, v6 := range s.cfg.families() {
		balanced[v6] = true
		for _, p := range s.cfg.routed(v6) {
			keep[p] = true
		}
	}
	var errs []error
	for p, r := range owned {
		v6 := p.Addr().Is6()
		switch {
		case keep[p]:
		case balanced[v6] && p.IsSingleIP():
			s.extRoutes[p.Addr()] = true
		default:
			s.log.Info("removing a route an earlier configuration left", "route", p.String(), "via", r.Gw.String())
			errs = append(errs, hostnet.DelOwned(r))
		}
	}
	if !balanced[true] {
		errs = append(errs, hostnet.Remove(s.gw, s.cfg.hop(true), nil))
	}
	return errors.Join(errs...)
}

// hostRoutes applies the external routes when the plugin runs on a node
// (unit tests have no gateway).
func (s *Service) hostRoutes() error {
	if s.gw == nil {
		return nil
	}
	return s.applyExternalRoutes()
}

// applyExternalRoutes routes every external IP of an installed Service
// into br-int, and no other.
func (s *Service) applyExternalRoutes() error {
	want := map[netip.Addr]bool{}
	for _, in := range s.installed {
		for _, a := range in.external {
			want[a] = true
		}
	}
	var errs []error
	for a := range s.extRoutes {
		if !want[a] {
			if err := hostnet.DelRoute(s.gw, hostPrefix(a)); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(s.extRoutes, a)
		}
	}
	for a := range want {
		if !s.extRoutes[a] {
			if err := hostnet.AddRoute(s.gw, s.cfg.hop(a.Is6()), hostPrefix(a)); err != nil {
				errs = append(errs, err)
				continue
			}
			s.extRoutes[a] = true
		}
	}
	return errors.Join(errs...)
}

// applyNodePorts brings the kernel's NodePort table to the NodePorts
// installed, when they (or the node's addresses) changed.
func (s *Service) applyNodePorts() error {
	var ps []hostnet.NodePort
	for _, in := range s.installed {
		for _, p := range in.ports {
			switch {
			case p.ClusterIP == s.cfg.nodePort:
				ps = append(ps, hostnet.NodePort{Proto: p.Proto, Port: p.Port})
			case s.cfg.ipv6 && p.ClusterIP == s.cfg.nodePort6:
				ps = append(ps, hostnet.NodePort{Proto: p.Proto, Port: p.Port, IPv6: true})
			}
		}
	}
	slices.SortFunc(ps, func(a, b hostnet.NodePort) int {
		if a.IPv6 != b.IPv6 {
			if a.IPv6 {
				return 1
			}
			return -1
		}
		if a.Proto != b.Proto {
			return int(a.Proto) - int(b.Proto)
		}
		return int(a.Port) - int(b.Port)
	})
	ps = slices.Compact(ps)
	if s.nodePortsSet && slices.Equal(ps, s.nodePorts) {
		return nil
	}
	if err := s.applyNodePortsFn(s.nodeIPs, s.cfg.nodePort, s.cfg.vip6(), ps); err != nil {
		return err
	}
	s.nodePorts, s.nodePortsSet = ps, true
	s.log.Info("NodePorts handed to br-int", "node_ips", s.nodeIPs, "nodeports", len(ps))
	return nil
}

// sync brings one Service's flows and groups to what the informers say.
func (s *Service) sync(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var svc *corev1.Service
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	if got, err := s.svcs.Services(ns).Get(name); err == nil {
		svc = got
	}
	old := s.installed[key]
	var sl []*discoveryv1.EndpointSlice
	var src string
	if svc != nil {
		sl = s.slicesOf(key)
		if src = s.sourceOf(svc, sl); src != "" && src == old.source {
			return nil
		}
	}
	want := s.desired(key, svc, sl, src)
	b := flow.NewBatch()
	s.diff(b, old, want)
	if b.Len() == 0 {
		if _, ok := s.installed[key]; ok {
			old.source = want.source // the same flows from newer objects
			s.installed[key] = old
		}
		return nil
	}
	if err := s.host.Apply(ctx, b); err != nil {
		return err
	}
	if len(want.ports) == 0 {
		delete(s.installed, key)
	} else {
		s.installed[key] = want
	}
	s.flushGone(ctx, key, old.ports, want.ports)
	if err := s.applyNodePorts(); err != nil {
		return err
	}
	if err := s.hostRoutes(); err != nil {
		return err
	}
	for _, p := range old.ports {
		if !slices.ContainsFunc(want.ports, func(q flows.Port) bool { return q.Group == p.Group }) {
			s.freeGroup(p.Group)
		}
	}
	s.log.Info("service synced", "service", key, "ports", len(want.ports), "endpoints", endpointCount(want.ports), "ops", b.Len())
	return nil
}

// flushGone removes the conntrack entries of UDP connections through a
// Service port towards an endpoint that left it: UDP has no end, so
// without this a client that keeps its socket (a DNS resolver) would keep
// sending to the departed endpoint. Connections to the endpoints that
// stay, and to the same endpoint through other Services, keep theirs.
func (s *Service) flushGone(ctx context.Context, key string, old, want []flows.Port) {
	f, ok := s.host.(sdk.ConntrackFlusher)
	if !ok {
		return
	}
	type portKey struct {
		ip    netip.Addr
		proto uint8
		port  uint16
	}
	still := map[portKey]map[flows.Endpoint]bool{}
	for _, p := range want {
		k := portKey{p.ClusterIP, p.Proto, p.Port}
		still[k] = map[flows.Endpoint]bool{}
		for _, e := range p.Endpoints {
			still[k][e] = true
		}
	}
	for _, p := range old {
		if p.Proto != flows.ProtoUDP {
			continue
		}
		for _, e := range p.Endpoints {
			if still[portKey{p.ClusterIP, p.Proto, p.Port}][e] {
				continue
			}
			err := f.FlushConntrack(ctx, sdk.ConntrackFilter{Zone: s.local.DNATZone, Protocol: flows.ProtoUDP,
				Orig:  sdk.ConntrackTuple{Dst: p.ClusterIP, DstPort: p.Port},
				Reply: sdk.ConntrackTuple{Src: e.IP, SrcPort: e.Port}})
			if err != nil {
				s.log.Warn("could not flush the conntrack entries towards a departed UDP endpoint", "service", key, "port", p.Name, "endpoint", netip.AddrPortFrom(e.IP, e.Port), "error", err)
				continue
			}
			s.log.Info("flushed UDP conntrack entries towards a departed endpoint", "service", key, "port", p.Name, "endpoint", netip.AddrPortFrom(e.IP, e.Port))
		}
	}
}

func endpointCount(ps []flows.Port) int {
	n := 0
	for _, p := range ps {
		n += len(p.Endpoints)
	}
	return n
}

// desired is what the switch should hold for svc (nil: deleted), from its
// slices sl; source is sourceOf(svc, sl), which the caller has compared.
func (s *Service) desired(key string, svc *corev1.Service, sl []*discoveryv1.EndpointSlice, source string) installed {
	in := installed{groups: map[uint32]flow.Group{}}
	if svc == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return in
	}
	in.source = source
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, ipText := range ips {
		ip, err := netip.ParseAddr(ipText)
		if err != nil {
			continue // "None" (headless)
		}
		if ip = ip.Unmap(); ip.Is6() && !s.cfg.ipv6 {
			s.log.Debug("an IPv6 ClusterIP, but no IPv6 serviceCIDR in the plugin's config: not balanced", "service", key, "cluster_ip", ip)
			continue
		}
		for _, sp := range svc.Spec.Ports {
			proto, ok := protocols[sp.Protocol]
			if !ok {
				continue
			}
			p := flows.Port{Service: key, Name: sp.Name, Proto: proto, ClusterIP: ip, Port: uint16(sp.Port),
				Endpoints: endpointsOf(sp, sl, s.podCIDRs, ip.Is6())}
			p.Group = s.group(fmt.Sprintf("%s/%s/%s/%s", key, ip, sp.Protocol, sp.Name))
			p.Affinity = affinityOf(svc)
			if svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal {
				p.Endpoints = slices.DeleteFunc(p.Endpoints, func(e flows.Endpoint) bool { return !e.Local })
			}
			in.add(s.local, p)
			if sp.NodePort != 0 && (svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer) {
				np := s.nodePortOf(key, svc, sp, proto, p)
				in.add(s.local, np)
				s.addRemote(&in, key, np, p)
			}
			for _, ext := range externalIPs(svc, ip.Is6()) {
				xp := s.externalOf(key, svc, sp, proto, p, ext)
				in.add(s.local, xp)
				s.addRemote(&in, key, xp, p)
				in.external = append(in.external, ext)
			}
		}
	}
	return in
}

// slicesOf are the EndpointSlices of the Service key, as the informer
// holds them.
func (s *Service) slicesOf(key string) []*discoveryv1.EndpointSlice {
	var sl []*discoveryv1.EndpointSlice
	objs, _ := s.slices.ByIndex(byService, key)
	for _, o := range objs {
		if es, ok := o.(*discoveryv1.EndpointSlice); ok {
			sl = append(sl, es)
		}
	}
	return sl
}

// sourceOf names what a Service's flows are derived from: the Service's
// and its slices' resource versions and the node facts' generation. The
// informers' initial adds queue every Service once more after the first
// install; comparing this is what makes those syncs free instead of
// rebuilding and comparing every flow (20 s of CPU at 10,000 Services).
// An object without a resource version (not from an apiserver) has no
// source: such a Service is always derived again.
func (s *Service) sourceOf(svc *corev1.Service, sl []*discoveryv1.EndpointSlice) string {
	if svc.ResourceVersion == "" || slices.ContainsFunc(sl, func(es *discoveryv1.EndpointSlice) bool { return es.ResourceVersion == "" }) {
		return ""
	}
	var b strings.Builder
	b.WriteString(string(svc.UID))
	b.WriteByte('/')
	b.WriteString(svc.ResourceVersion)
	fmt.Fprintf(&b, "/%d", s.factsGen)
	vs := make([]string, 0, len(sl))
	for _, es := range sl {
		vs = append(vs, es.Name+"@"+es.ResourceVersion)
	}
	slices.Sort(vs)
	for _, v := range vs {
		b.WriteByte(' ')
		b.WriteString(v)
	}
	return b.String()
}

// externalIPs are the Service's spec.externalIPs and load-balancer
// ingress IPs of one family (IPv6 or IPv4): the ClusterIP's of that
// family balances them.
func externalIPs(svc *corev1.Service, ipv6 bool) []netip.Addr {
	var out []netip.Addr
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && a.Unmap().Is6() == ipv6 && !slices.Contains(out, a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	for _, a := range svc.Spec.ExternalIPs {
		add(a)
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		add(in.IP)
	}
	return out
}

// externalOf is a Service port on an external IP: traffic from outside
// that the network routes to a node, and from pods. It is balanced like
// the NodePort: externalTrafficPolicy Local keeps the client's address and
// uses local endpoints only, Cluster SNATs to the gateway IP.
func (s *Service) externalOf(key string, svc *corev1.Service, sp corev1.ServicePort, proto uint8, cluster flows.Port, ip netip.Addr) flows.Port {
	p := s.nodePortOf(key, svc, sp, proto, cluster)
	p.Name, p.ClusterIP, p.Port = sp.Name+"@"+ip.String(), ip, uint16(sp.Port)
	p.Group = s.group(fmt.Sprintf("%s/external/%s/%s/%d", key, ip, sp.Protocol, sp.Port))
	return p
}

// addRemote adds, beside a Local address's port (a NodePort, an external
// or load-balancer IP, externalTrafficPolicy Local), its port for the pods
// of other nodes. They are in-cluster clients, so like this node's pods
// they get every endpoint of the ClusterIP; but they arrive with their own
// addresses from another node, so their connections are SNATed to the
// gateway address, as with Cluster: an endpoint's answer then comes back
// through this node, which undid the node address's DNAT, instead of
// straight to a pod that never dialled the endpoint.
func (s *Service) addRemote(in *installed, key string, local, cluster flows.Port) {
	if local.InClusterGroup == 0 || len(s.remotePods) == 0 {
		return
	}
	r := local
	r.Name = local.Name + "@remote-pods"
	r.SNAT, r.Endpoints, r.InCluster, r.InClusterGroup, r.Sources = true, cluster.Endpoints, nil, 0, s.remotePods
	r.Group = s.group(fmt.Sprintf("%s/remote-pods/%s/%d/%d", key, local.ClusterIP, local.Proto, local.Port))
	in.add(s.local, r)
}

func (in *installed) add(l flows.Local, p flows.Port) {
	fs, g := flows.PortFlows(l, p)
	if len(p.Sources) > 0 {
		// A companion port's SCTP port translations for the local
		// endpoints are its Local twin's, flow for flow.
		have := map[flow.Key]bool{}
		for _, f := range in.flows {
			have[f.Key()] = true
		}
		fs = slices.DeleteFunc(fs, func(f flow.Flow) bool { return have[f.Key()] })
	}
	in.ports = append(in.ports, p)
	in.flows = append(in.flows, fs...)
	if g != nil {
		in.groups[g.ID] = *g
	}
}

// nodePortOf is a Service port's NodePort as br-int balances it: the
// traffic arrives for the NodePort address; with externalTrafficPolicy
// Local only local endpoints serve it and the client's address is kept,
// with Cluster every endpoint does and the source becomes the gateway IP,
// so answers from other nodes come back here. cluster is the ClusterIP
// port: with Local, clients inside the cluster (this node's pods, the node)
// are balanced over its endpoints instead, as kube-proxy does.
func (s *Service) nodePortOf(key string, svc *corev1.Service, sp corev1.ServicePort, proto uint8, cluster flows.Port) flows.Port {
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	vip, name, groupKey := s.cfg.nodePort, sp.Name+"@nodeport", "nodeport"
	if cluster.ClusterIP.Is6() {
		vip, name, groupKey = s.cfg.nodePort6, sp.Name+"@nodeport6", "nodeport6"
	}
	p := flows.Port{Service: key, Name: name, Proto: proto, ClusterIP: vip, Port: uint16(sp.NodePort), SNAT: !local}
	if local && len(cluster.Endpoints) > 0 {
		// The node's own connections come masqueraded to its gateway
		// address, inside the pod CIDR (package hostnet).
		p.InClusterGroup = cluster.Group
		p.InCluster = slices.Clone(s.podCIDRs)
	}
	for _, e := range cluster.Endpoints {
		if local && !e.Local {
			continue
		}
		// A local endpoint keeps Local: it may dial its own node's
		// NodePort and be chosen (a hairpin through the node's address).
		p.Endpoints = append(p.Endpoints, e)
	}
	if sp.NodePort != 0 {
		p.Group = s.group(fmt.Sprintf("%s/%s/%s/%d", key, groupKey, sp.Protocol, sp.NodePort))
	}
	p.Affinity = affinityOf(svc)
	return p
}

// affinityOf is the Service's ClientIP session affinity timeout in
// seconds (0: none). An OpenFlow idle timeout holds at most 65535 s, so a
// longer one (the default is 10800, the API allows 86400) is cut to that.
func affinityOf(svc *corev1.Service) uint16 {
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return 0
	}
	t := int32(corev1.DefaultClientIPServiceAffinitySeconds)
	if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		t = *c.ClientIP.TimeoutSeconds
	}
	return uint16(min(max(t, 1), 65535))
}

var protocols = map[corev1.Protocol]uint8{
	corev1.ProtocolTCP: flows.ProtoTCP, corev1.ProtocolUDP: flows.ProtoUDP, corev1.ProtocolSCTP: flows.ProtoSCTP, "": flows.ProtoTCP,
}

// endpointsOf picks the endpoints of one Service port from its slices of
// one family (IPv6 or IPv4), as kube-proxy does: ready ones; if none is
// ready, the serving ones that are terminating. The slice port is found by
// the Service port's name (the EndpointSlice controller resolved a named
// targetPort per pod).
func endpointsOf(sp corev1.ServicePort, sl []*discoveryv1.EndpointSlice, podCIDRs []netip.Prefix, ipv6 bool) []flows.Endpoint {
	family := discoveryv1.AddressTypeIPv4
	if ipv6 {
		family = discoveryv1.AddressTypeIPv6
	}
	var ready, terminating []flows.Endpoint
	seen := map[flows.Endpoint]bool{}
	proto := sp.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	for _, es := range sl {
		if es.AddressType != family {
			continue
		}
		var port uint16
		for _, p := range es.Ports {
			pn, pp := "", corev1.ProtocolTCP
			if p.Name != nil {
				pn = *p.Name
			}
			if p.Protocol != nil {
				pp = *p.Protocol
			}
			if pn == sp.Name && pp == proto && p.Port != nil && *p.Port > 0 && *p.Port < 65536 {
				port = uint16(*p.Port)
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range es.Endpoints {
			c := e.Conditions
			isReady := c.Ready == nil || *c.Ready
			serving := isReady
			if c.Serving != nil {
				serving = *c.Serving
			}
			term := c.Terminating != nil && *c.Terminating
			for _, a := range e.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || ip.Unmap().Is6() != ipv6 {
					continue
				}
				ip = ip.Unmap()
				ep := flows.Endpoint{IP: ip, Port: port, Local: slices.ContainsFunc(podCIDRs, func(p netip.Prefix) bool { return p.Contains(ip) })}
				if seen[ep] {
					continue
				}
				switch {
				case isReady:
					seen[ep] = true
					ready = append(ready, ep)
				case serving && term:
					seen[ep] = true
					terminating = append(terminating, ep)
				}
			}
		}
	}
	out := ready
	if len(out) == 0 {
		out = terminating
	}
	slices.SortFunc(out, func(a, b flows.Endpoint) int {
		if c := a.IP.Compare(b.IP); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
	return out
}

// group returns the select group ID of a Service port: a hash of its key,
// so a restarted plugin picks the same IDs, probing past collisions.
func (s *Service) group(key string) uint32 {
	if id, ok := s.groups[key]; ok {
		return id
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	id := h.Sum32() & flow.MaxLocalGroupID
	for id == 0 || s.groupKey[id] != "" {
		id = (id + 1) & flow.MaxLocalGroupID
	}
	s.groups[key], s.groupKey[id] = id, key
	return id
}

func (s *Service) freeGroup(id uint32) {
	delete(s.groups, s.groupKey[id])
	delete(s.groupKey, id)
}

// diff appends to b what turns old into want: groups added, modified or
// deleted (the batch orders them around the flows), flows by key.
func (s *Service) diff(b *flow.Batch, old, want installed) {
	for _, id := range slices.Sorted(maps.Keys(want.groups)) {
		g := want.groups[id]
		og, had := old.groups[id]
		switch {
		case !had:
			b.AddGroup(g)
		case og.String() != g.String():
			b.ModifyGroup(g)
		}
	}
	for id := range old.groups {
		if _, ok := want.groups[id]; !ok {
			b.DeleteGroup(id)
		}
	}
	was := map[flow.Key]flow.Flow{}
	for _, f := range old.flows {
		was[f.Key()] = f
	}
	is := map[flow.Key]bool{}
	for _, f := range want.flows {
		is[f.Key()] = true
		o, ok := was[f.Key()]
		switch {
		case !ok:
			b.AddFlows(f)
		case o.String() != f.String() || o.Tag != f.Tag:
			b.ModifyFlows(f)
		}
	}
	for _, f := range old.flows {
		if !is[f.Key()] {
			b.DeleteFlows(f)
		}
	}
}

func (s *Service) setFacts(n sdk.NodeFacts) {
	s.podCIDRs = n.PodCIDRs
	s.nodeIPs = append(slices.Clone(n.NodeIPs), n.ExternalIPs...)
	s.local.GatewayIP = netip.Addr{}
	switch {
	case n.GatewayIP.Is4():
		s.local.GatewayIP = n.GatewayIP
	default:
		for _, c := range n.PodCIDRs {
			if c.Addr().Is4() {
				s.local.GatewayIP = c.Masked().Addr().Next() // podnet's IPAM gives the gateway the first address
				break
			}
		}
	}
	s.local.GatewayIP6 = netip.Addr{}
	if s.cfg.ipv6 {
		for _, c := range n.PodCIDRs {
			if c.Addr().Is6() {
				s.local.GatewayIP6 = c.Masked().Addr().Next() // as for IPv4: podnet's gateway
				break
			}
		}
		if n.GatewayIP.Is6() {
			s.local.GatewayIP6 = n.GatewayIP
		}
	}
	s.gwMAC = n.GatewayMAC
	if len(s.gwMAC) != 6 && s.gw != nil {
		s.gwMAC = s.gw.Attrs().HardwareAddr
	}
	s.local.GatewayMAC = s.gwMAC
}

// NodeFactsChanged re-derives which endpoints are local (pod CIDRs) and
// resyncs every Service.
func (s *Service) NodeFactsChanged(_ context.Context, req sdk.NodeFactsChangedRequest, _ *sdk.NodeFactsChangedResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setFacts(req.New)
	s.factsGen++
	s.nodePortsSet = false // the node's addresses may have changed
	if err := s.applyNodePorts(); err != nil {
		s.log.Warn("could not update the NodePort table for new node addresses", "error", err)
	}
	if s.queue != nil {
		for k := range s.installed {
			s.queue.Add(k)
		}
	}
	return nil
}

// NodeEvent keeps the other nodes' pod CIDRs: a change re-derives the
// Services with a Local address (addRemote), and only those.
func (s *Service) NodeEvent(_ context.Context, req sdk.NodeEventRequest, _ *sdk.NodeEventResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cidrs []netip.Prefix
	if req.Kind != sdk.NodeDeleted {
		for _, c := range req.Node.PodCIDRs {
			if (c.Addr().Is4() || s.cfg.ipv6) && !slices.Contains(s.podCIDRs, c.Masked()) {
				cidrs = append(cidrs, c.Masked())
			}
		}
	}
	if slices.Equal(s.peers[req.Node.Name], cidrs) {
		return nil
	}
	if len(cidrs) == 0 {
		delete(s.peers, req.Node.Name)
	} else {
		s.peers[req.Node.Name] = cidrs
	}
	var all []netip.Prefix
	for _, cs := range s.peers {
		all = append(all, cs...)
	}
	slices.SortFunc(all, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	s.remotePods = slices.Compact(all)
	for k, in := range s.installed {
		if slices.ContainsFunc(in.ports, func(p flows.Port) bool { return p.InClusterGroup != 0 || len(p.Sources) > 0 }) {
			in.source = "" // derived again, whatever its objects' versions
			s.installed[k] = in
			if s.queue != nil {
				s.queue.Add(k)
			}
		}
	}
	s.log.Info("pod CIDRs of other nodes changed", "node", req.Node.Name, "pod_cidrs", cidrs, "remote_pod_cidrs", len(s.remotePods))
	return nil
}

// PacketIn answers a new connection to a Service port without endpoints.
func (s *Service) PacketIn(ctx context.Context, req sdk.PacketInRequest, _ *sdk.PacketInResponse) error {
	if req.Table != flows.LB || string(req.Userdata) != string(flows.RejectUserdata) {
		return nil
	}
	s.mu.Lock()
	host, mac := s.host, s.gwMAC
	s.mu.Unlock()
	out, err := reject.Answer(req.Data, mac)
	if errors.Is(err, reject.ErrNotAnswered) {
		return nil
	}
	if err != nil {
		s.log.Debug("a packet to a Service without endpoints could not be answered", "table", req.Table, "error", err)
		return nil
	}
	return host.PacketOut(ctx, sdk.PacketOut{ResumeTable: flows.Inject, Data: out})
}

// Stop ends the watches. Flows stay (a next incarnation takes them
// over); on unload the route to the Service CIDRs goes too.
func (s *Service) Stop(_ context.Context, req sdk.StopRequest, _ *sdk.StopResponse) error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	if !req.Unload || s.gw == nil {
		return nil
	}
	s.log.Info("unloaded: removing the route to the Service CIDRs and external IPs and the NodePort table", "service_cidrs", s.cfg.cidrs)
	// Every route the plugin made, whichever configuration made it.
	owned, err := hostnet.Owned(s.gw)
	errs := []error{err}
	for _, r := range owned {
		errs = append(errs, hostnet.DelOwned(r))
	}
	for _, v6 := range []bool{false, true} {
		errs = append(errs, hostnet.Remove(s.gw, s.cfg.hop(v6), nil))
	}
	return errors.Join(append(errs, hostnet.ApplyNodePorts(nil, s.cfg.nodePort, s.cfg.vip6(), nil))...)
}
