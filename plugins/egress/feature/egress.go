package feature

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/plugins/egress/flows"
	"switchyard.dev/switchyard/plugins/egress/hostnet"
	"switchyard.dev/switchyard/plugins/egress/placement"
	"switchyard.dev/switchyard/plugins/internal/clusterclient"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Version of the plugin, reported in Describe.
const Version = "0.1.0"

// FieldManager is the server-side apply manager of the agents' status
// fields (status.egressNode, IPAssigned); the holder forces ownership, so
// a new holder takes them over from a dead one.
const FieldManager = "switchyard-egress-agent"

// Egress implements the plugin.
type Egress struct {
	log   *slog.Logger
	host  sdk.Host
	cfg   Config
	self  string
	local flows.Local

	kick     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	ml *memberlist.Memberlist

	nodes, pods, nss, egs, pools cache.SharedIndexInformer
	factory                      informers.SharedInformerFactory
	dfactory                     dynamicinformer.DynamicSharedInformerFactory
	dyn                          dynamic.Interface

	// Owned by the loop goroutine.
	installed map[flow.Key]flow.Flow
	meters    map[uint32]flow.Meter
	marks     map[netip.Addr]uint32
	lastNFT   string
	dev       hostnet.Holder
	uplink    netlink.Link
	lastJoin  time.Time
	ringCache map[string]*placement.Ring
	reported  map[string]string // egress → "ip@node" last written
	// statusBackoff spaces out the retries of a failed status write, per
	// Egress: the loop runs on every pod and node event, and an apiserver
	// that refuses the write (RBAC, an admission webhook, an outage) would
	// otherwise get it again at each of them.
	statusBackoff *flowcontrol.Backoff
	// announced are the held IPs this incarnation announced: an IP found
	// already on the device at start (a restart, or a node back from a
	// cut) is announced again, or the underlay keeps sending it to the
	// node that held it meanwhile.
	announced map[netip.Addr]bool
	// routes: the policy routing of Egress IPs with subnetInfo (subnet.go).
	routes routeState
}

var (
	_ sdk.Feature = (*Egress)(nil)
	_ sdk.Stopper = (*Egress)(nil)
)

// New returns an unstarted egress plugin.
func New() *Egress {
	return &Egress{log: slog.Default(), kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// Describe declares the table and the pkt_mark bits.
func (e *Egress) Describe(_ context.Context, req sdk.DescribeRequest, resp *sdk.DescribeResponse) error {
	if _, err := ParseConfig(req.Config); err != nil {
		return err
	}
	resp.Name = "egress"
	resp.Version = Version
	resp.Tables = flows.Tables()
	resp.Resources = []sdk.Resource{{Kind: sdk.ResourcePktMark, Name: flows.MarkResource, Width: flows.MarkWidth, Exported: true}}
	return nil
}

// Start connects to the apiserver, joins the memberlist and starts the
// loop that keeps the node in step with the plan; it says Synced after the
// first plan is applied.
func (e *Egress) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	cfg, err := ParseConfig(req.Config)
	if err != nil {
		return err
	}
	if req.Cluster.APIServer.URL == "" {
		return errors.New("egress needs the apiserver: the agent runs without one (give it a kubeconfig or run it in-cluster)")
	}
	grant, ok := req.Assignment.Grants[flows.MarkResource]
	if !ok {
		return fmt.Errorf("the host granted no pkt_mark %q", flows.MarkResource)
	}
	e.host, e.log, e.cfg, e.self = req.Host, req.Host.Logger(), cfg, req.Node.Name
	e.local = flows.Local{GatewayMAC: req.Node.GatewayMAC, Mark: grant}
	if len(e.local.GatewayMAC) != 6 {
		gw, err := netlink.LinkByName(cfg.Gateway)
		if err != nil {
			return fmt.Errorf("gateway %s: %w (is podnet running?)", cfg.Gateway, err)
		}
		e.local.GatewayMAC = gw.Attrs().HardwareAddr
	}
	var nodeIP netip.Addr
	for _, ip := range req.Node.NodeIPs {
		if ip.Unmap().Is4() {
			nodeIP = ip.Unmap()
			break
		}
	}
	if !nodeIP.IsValid() {
		return errors.New("egress: the node has no IPv4 address for memberlist and SNAT")
	}
	if e.uplink, err = hostnet.UplinkOf(nodeIP); err != nil {
		return err
	}
	dev, err := hostnet.EnsureDevice(cfg.Device)
	switch {
	case errors.Is(err, hostnet.ErrNoDummy):
		e.dev = hostnet.OnUplink(e.uplink)
		e.log.Warn("no dummy devices in this kernel: Egress IPs are held on the uplink, labelled", "uplink", e.uplink.Attrs().Name, "label", e.dev.Label)
	case err != nil:
		return err
	default:
		e.dev = hostnet.Holder{Link: dev, Uplink: e.uplink}
	}
	rc, err := clusterclient.Config(req.Cluster, "switchyard-egress/"+Version)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	if e.dyn, err = dynamic.NewForConfig(rc); err != nil {
		return err
	}
	if err := e.startMemberlist(nodeIP); err != nil {
		return err
	}
	e.factory = informers.NewSharedInformerFactory(kube, 0)
	e.dfactory = dynamicinformer.NewDynamicSharedInformerFactory(e.dyn, 0)
	e.nodes = e.factory.Core().V1().Nodes().Informer()
	e.pods = e.factory.Core().V1().Pods().Informer()
	e.nss = e.factory.Core().V1().Namespaces().Informer()
	e.egs = e.dfactory.ForResource(crdv1.EgressesResource).Informer()
	e.pools = e.dfactory.ForResource(crdv1.ExternalIPPoolsResource).Informer()
	h := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { e.poke() }, UpdateFunc: func(any, any) { e.poke() }, DeleteFunc: func(any) { e.poke() }}
	for _, inf := range []cache.SharedIndexInformer{e.nodes, e.pods, e.nss, e.egs, e.pools} {
		inf.AddEventHandler(h)
	}
	e.installed, e.marks, e.ringCache, e.reported = map[flow.Key]flow.Flow{}, map[netip.Addr]uint32{}, map[string]*placement.Ring{}, map[string]string{}
	e.statusBackoff = flowcontrol.NewBackOff(statusRetryFirst, statusRetryMax)
	e.announced, e.meters = map[netip.Addr]bool{}, map[uint32]flow.Meter{}
	e.factory.Start(e.stop)
	e.dfactory.Start(e.stop)
	e.log.Info("egress starting", "node", e.self, "node_ip", nodeIP, "memberlist_port", cfg.MemberlistPort, "device", cfg.Device,
		"uplink", e.uplink.Attrs().Name, "pkt_mark", fmt.Sprintf("%#x", grant.Mask()))
	go e.loop()
	return nil
}

// loop waits for the caches, applies the first plan, says Synced, then
// re-plans on every change (debounced a little, so a burst of events is
// one pass) and every few seconds (memberlist joins, status retries).
func (e *Egress) loop() {
	defer close(e.done)
	if !cache.WaitForCacheSync(e.stop, e.nodes.HasSynced, e.pods.HasSynced, e.nss.HasSynced, e.egs.HasSynced, e.pools.HasSynced) {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-e.stop; cancel() }()
	// Join the other agents before the first plan: a plugin alone in its
	// member list would count every other node dead and claim (and
	// announce) every Egress IP its pools allow it.
	e.joinAll()
	synced := false
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		if err := e.sync(ctx); err != nil {
			e.log.Warn("egress sync failed; retrying", "error", err)
		} else if !synced {
			synced = true
			if err := e.host.Synced(ctx); err != nil {
				e.log.Warn("telling the host Synced", "error", err)
			}
		}
		select {
		case <-e.stop:
			return
		case <-e.kick:
			time.Sleep(10 * time.Millisecond)
		case <-tick.C:
		}
	}
}

func (e *Egress) poke() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Stop leaves the memberlist when unloaded (the others take the IPs at
// once) and removes the device and SNAT table; on a mere restart it only
// shuts memberlist down, leaves the datapath in place, and a next
// incarnation takes over.
func (e *Egress) Stop(_ context.Context, req sdk.StopRequest, _ *sdk.StopResponse) error {
	e.stopOnce.Do(func() { close(e.stop) })
	if e.host != nil {
		<-e.done
	}
	var errs []error
	if e.ml != nil {
		if req.Unload {
			errs = append(errs, e.ml.Leave(time.Second))
		}
		errs = append(errs, e.ml.Shutdown())
	}
	if e.factory != nil {
		e.factory.Shutdown()
		e.dfactory.Shutdown()
	}
	if req.Unload {
		errs = append(errs, hostnet.RemoveSNAT(), e.dev.Clear())
		errs = append(errs, hostnet.RemoveRoutes(e.cfg.RouteTableBase))
		e.log.Info("unloaded: removed the Egress IP device and the SNAT table")
	}
	return errors.Join(errs...)
}

// startMemberlist joins the agents' gossip on the node IP. The timings are
// tighter than memberlist's LAN defaults so a dead node is declared dead
// in about a second (probe every 200 ms, suspicion for a few probes).
func (e *Egress) startMemberlist(ip netip.Addr) error {
	mc := memberlist.DefaultLANConfig()
	mc.Name = e.self
	mc.BindAddr = ip.String()
	mc.BindPort = e.cfg.MemberlistPort
	mc.AdvertiseAddr = ip.String()
	mc.AdvertisePort = e.cfg.MemberlistPort
	mc.ProbeInterval = 200 * time.Millisecond
	mc.ProbeTimeout = 100 * time.Millisecond
	mc.SuspicionMult = 2
	mc.SuspicionMaxTimeoutMult = 2
	mc.GossipInterval = 50 * time.Millisecond
	mc.GossipToTheDeadTime = 2 * time.Second
	mc.PushPullInterval = 5 * time.Second
	mc.TCPTimeout = time.Second
	mc.Events = &memberEvents{poke: e.poke, log: e.log}
	mc.Logger = log.New(io.Discard, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("memberlist on %s:%d: %w (is the port free? set egress memberlistPort)", ip, e.cfg.MemberlistPort, err)
	}
	e.ml = ml
	return nil
}

type memberEvents struct {
	poke func()
	log  *slog.Logger
}

func (m *memberEvents) NotifyJoin(n *memberlist.Node) {
	m.log.Info("memberlist: node alive", "node", n.Name, "addr", n.Addr)
	m.poke()
}
func (m *memberEvents) NotifyLeave(n *memberlist.Node) {
	m.log.Info("memberlist: node gone", "node", n.Name, "addr", n.Addr)
	m.poke()
}
func (m *memberEvents) NotifyUpdate(*memberlist.Node) { m.poke() }

// snapshot reads the caches and the member list.
func (e *Egress) snapshot() (Snapshot, error) {
	s := Snapshot{Self: e.self, Nodes: map[string]NodeView{}, Alive: map[string]bool{e.self: true}, Pools: map[string]labels.Selector{},
		Namespaces: map[string]labels.Set{}}
	s.PoolSubnets = map[string]Subnet{}
	for _, m := range e.ml.Members() {
		s.Alive[m.Name] = true
	}
	for _, o := range e.nodes.GetStore().List() {
		n := o.(*corev1.Node)
		v := NodeView{Labels: labels.Set(n.Labels)}
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil {
				continue
			}
			if ip.Is4() && !v.IP.IsValid() {
				v.IP = ip // the tunnel's underlay address
			} else if ip.Is6() {
				s.Keep = append(s.Keep, netip.PrefixFrom(ip, 128))
			}
		}
		for _, c := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(c); err == nil {
				v.PodCIDRs = append(v.PodCIDRs, p.Masked())
				s.Keep = append(s.Keep, p.Masked())
			}
		}
		if v.IP.IsValid() {
			s.Keep = append(s.Keep, netip.PrefixFrom(v.IP, 32))
		}
		s.Nodes[n.Name] = v
	}
	s.Keep = append(s.Keep, e.cfg.ServiceCIDRs...)
	s.Keep = append(s.Keep, e.cfg.ExceptCIDRs...)
	for _, o := range e.nss.GetStore().List() {
		ns := o.(*corev1.Namespace)
		s.Namespaces[ns.Name] = labels.Set(ns.Labels)
	}
	for _, o := range e.pools.GetStore().List() {
		p, err := decode[crdv1.ExternalIPPool](o)
		if err != nil {
			return s, err
		}
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NodeSelector)
		if err != nil {
			e.log.Warn("ExternalIPPool has an invalid nodeSelector; its IPs are held nowhere", "pool", p.Name, "error", err)
			continue
		}
		s.Pools[p.Name] = sel
		if sub, ok := e.poolSubnet(p); ok {
			s.PoolSubnets[p.Name] = sub
		}
	}
	for _, o := range e.egs.GetStore().List() {
		eg, err := decode[crdv1.Egress](o)
		if err != nil {
			return s, err
		}
		v := EgressView{Name: eg.Name, Created: eg.CreationTimestamp.Time, IPs: egressIPs(eg.Status), Pool: eg.Spec.ExternalIPPool}
		if len(v.IPs) == 0 {
			continue // not allocated (yet); the controller says why in IPAllocated
		}
		if ps := eg.Spec.AppliedTo.PodSelector; ps != nil {
			if v.Pods, err = metav1.LabelSelectorAsSelector(ps); err != nil {
				e.log.Warn("Egress has an invalid podSelector; it selects nothing", "egress", eg.Name, "error", err)
				continue
			}
		}
		if ns := eg.Spec.AppliedTo.NamespaceSelector; ns != nil {
			if v.Namespaces, err = metav1.LabelSelectorAsSelector(ns); err != nil {
				e.log.Warn("Egress has an invalid namespaceSelector; it selects nothing", "egress", eg.Name, "error", err)
				continue
			}
		}
		if bw := eg.Spec.Bandwidth; bw != nil {
			r, rerr := flows.ParseBits(bw.Rate)
			b, berr := flows.ParseBits(bw.Burst)
			if err := errors.Join(rerr, berr); err != nil {
				e.log.Warn("Egress has an invalid bandwidth; it is not limited", "egress", eg.Name, "error", err)
			} else {
				v.Bandwidth = Bandwidth{RateKbps: r, BurstKbit: b}
			}
		}
		if v.Pods == nil && v.Namespaces == nil {
			continue // appliedTo with neither selector selects nothing
		}
		s.Egresses = append(s.Egresses, v)
	}
	for _, o := range e.pods.GetStore().List() {
		p := o.(*corev1.Pod)
		if p.Spec.HostNetwork || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		v := PodView{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, Labels: labels.Set(p.Labels)}
		for _, a := range p.Status.PodIPs {
			if ip, err := netip.ParseAddr(a.IP); err == nil {
				v.IPs = append(v.IPs, ip)
			}
		}
		if len(v.IPs) > 0 {
			s.Pods = append(s.Pods, v)
		}
	}
	return s, nil
}

// egressIPs are status.egressIPs (status.egressIP as written by a
// controller that predates it), one per family, IPv4 first.
func egressIPs(st crdv1.EgressStatus) []netip.Addr {
	raw := st.EgressIPs
	if len(raw) == 0 && st.EgressIP != "" {
		raw = []string{st.EgressIP}
	}
	var out []netip.Addr
	for _, r := range raw {
		ip, err := netip.ParseAddr(r)
		if err != nil || slices.ContainsFunc(out, func(a netip.Addr) bool { return a.Is4() == ip.Unmap().Is4() }) {
			continue
		}
		out = append(out, ip.Unmap())
	}
	slices.SortStableFunc(out, func(a, b netip.Addr) int { return a.BitLen() - b.BitLen() })
	return out
}

func decode[T any](obj any) (*T, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected %T in an informer", obj)
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, err
	}
	return out, nil
}

func (e *Egress) ring(nodes []string) *placement.Ring {
	k := strings.Join(nodes, ",")
	if r, ok := e.ringCache[k]; ok {
		return r
	}
	if len(e.ringCache) > 64 {
		clear(e.ringCache)
	}
	r := placement.NewRing(nodes)
	e.ringCache[k] = r
	return r
}

// sync computes the plan and applies what differs: flows, Egress IPs on
// the device (announced when added), the SNAT table, status.
func (e *Egress) sync(ctx context.Context) error {
	s, err := e.snapshot()
	if err != nil {
		return err
	}
	e.join(s)
	plan := Desired(s, e.ring)
	// Marks: stable per held IP, the smallest free otherwise.
	for ip := range e.marks {
		if _, ok := plan.Held[ip]; !ok {
			delete(e.marks, ip)
		}
	}
	for _, ip := range slices.SortedFunc(maps.Keys(plan.Held), netip.Addr.Compare) {
		if _, ok := e.marks[ip]; ok {
			continue
		}
		used := map[uint32]bool{}
		for _, m := range e.marks {
			used[m] = true
		}
		for id := uint32(1); id < 1<<flows.MarkWidth; id++ {
			if !used[id] {
				e.marks[ip] = id
				break
			}
		}
	}
	byPod := map[netip.Addr]uint32{}
	meterOf := map[netip.Addr]uint32{}
	meters := map[uint32]flow.Meter{}
	for eip, srcs := range plan.Held {
		first, limited := plan.MeterIP[eip]
		meter := e.marks[first]
		if bw := plan.Bandwidth[first]; limited && meter != 0 {
			meters[meter] = flows.Meter(meter, bw.RateKbps, bw.BurstKbit)
		}
		for _, src := range srcs {
			byPod[src] = e.marks[eip]
			if limited {
				meterOf[src] = meter
			}
		}
	}
	want := flows.KeepFlows(s.Keep)
	for _, p := range plan.Pods {
		if !p.Holder.IsValid() {
			p.MarkID, p.Meter = byPod[p.IP], meterOf[p.IP]
			if p.MarkID == 0 {
				continue // more than 255 IPs held here: left unmarked
			}
		}
		want = append(want, flows.PodFlows(e.local, p)...)
	}
	if err := e.applyFlows(ctx, want, meters); err != nil {
		return err
	}
	// SNAT before the address: no packet leaves with the wrong source.
	rules := hostnet.Rules{Keep: s.Keep, Gateway: e.cfg.Gateway}
	for _, ip := range slices.SortedFunc(maps.Keys(plan.Held), netip.Addr.Compare) {
		srcs := slices.SortedFunc(slices.Values(plan.Held[ip]), netip.Addr.Compare)
		rules.SNATs = append(rules.SNATs, hostnet.SNAT{IP: ip, Mark: e.marks[ip] << e.local.Mark.Offset, MarkMask: uint32(e.local.Mark.Mask()), Sources: srcs})
	}
	if k := fmt.Sprint(rules); k != e.lastNFT {
		if err := hostnet.ApplySNAT(rules); err != nil {
			return err
		}
		e.lastNFT = k
	}
	if err := e.applyRouting(s, plan); err != nil {
		return err
	}
	if err := e.applyAddrs(plan); err != nil {
		return err
	}
	return e.report(ctx, plan, e.self == slices.Min(slices.Collect(maps.Keys(s.Alive))))
}

// applyFlows installs the difference between the installed and the wanted
// meters and flows in one batch: new meters before the flows that use
// them, old meters after the flows that used them.
func (e *Egress) applyFlows(ctx context.Context, want []flow.Flow, meters map[uint32]flow.Meter) error {
	b := flow.NewBatch()
	for id, m := range meters {
		old, ok := e.meters[id]
		switch {
		case !ok:
			b.AddMeter(m)
		case old.String() != m.String():
			b.ModifyMeter(m)
		}
	}
	next := map[flow.Key]flow.Flow{}
	for _, f := range want {
		next[f.Key()] = f
		old, ok := e.installed[f.Key()]
		switch {
		case !ok:
			b.AddFlows(f)
		case old.String() != f.String() || old.Tag != f.Tag:
			b.ModifyFlows(f)
		}
	}
	for k, f := range e.installed {
		if _, ok := next[k]; !ok {
			b.DeleteFlows(f)
		}
	}
	for id := range e.meters {
		if _, ok := meters[id]; !ok {
			b.DeleteMeter(id)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	if err := e.host.Apply(ctx, b); err != nil {
		return fmt.Errorf("egress flows: %w", err)
	}
	e.installed, e.meters = next, meters
	e.log.Debug("egress flows applied", "changes", b.Len(), "flows", len(next))
	return nil
}

// applyAddrs puts the held IPs on the device (announcing each new one) and
// removes the others.
func (e *Egress) applyAddrs(plan Plan) error {
	have, err := e.dev.Addrs()
	if err != nil {
		return err
	}
	for ip := range have {
		if _, ok := plan.Held[ip]; !ok {
			if err := e.dev.DelAddr(ip); err != nil {
				return err
			}
			e.log.Info("Egress IP released", "ip", ip)
		}
	}
	for ip := range e.announced {
		if _, ok := plan.Held[ip]; !ok {
			delete(e.announced, ip)
		}
	}
	for ip := range plan.Held {
		if !have[ip] {
			if err := e.dev.AddAddr(ip); err != nil {
				return err
			}
			dev := e.dev.Link
			if ip.Is6() {
				dev = e.dev.Uplink
			}
			e.log.Info("Egress IP taken", "ip", ip, "device", dev.Attrs().Name)
		}
		if e.announced[ip] {
			continue
		}
		e.announced[ip] = true
		// Announce now and twice more: one lost frame must not leave a
		// neighbour on the old holder.
		go func(ip netip.Addr) {
			for i := range 3 {
				if i > 0 {
					time.Sleep(500 * time.Millisecond)
				}
				if err := hostnet.Announce(e.uplink, ip); err != nil {
					e.log.Warn("announcing the Egress IP", "ip", ip, "error", err)
				}
			}
		}(ip)
	}
	return nil
}

// Status writes that failed are retried after 1 s, doubling up to 1 min.
const (
	statusRetryFirst = time.Second
	statusRetryMax   = time.Minute
)

// report writes status.egressNode and IPAssigned for the Egresses this
// node holds, once per change. An Egress no live node may hold gets
// IPAssigned=False from one node only, the live one first by name
// (speaker), so the condition does not flap between writers.
func (e *Egress) report(ctx context.Context, plan Plan, speaker bool) error {
	var errs []error
	for _, pl := range plan.Placements {
		ips := joinAddrs(pl.IPs)
		holder, status, reason, msg := e.self, "True", crdv1.ReasonAssigned, fmt.Sprintf("%s on node %s", ips, e.self)
		switch {
		case pl.Holder == "" && speaker:
			holder, status, reason = "", "False", crdv1.ReasonNoEligibleNode
			msg = fmt.Sprintf("no live node may hold %s: check the ExternalIPPool's nodeSelector and that the agents on those nodes run", ips)
		case pl.Holder != e.self:
			delete(e.reported, pl.Egress)
			continue
		}
		k := ips + "@" + holder
		if e.reported[pl.Egress] == k {
			continue
		}
		now := e.statusBackoff.Clock.Now()
		if e.statusBackoff.IsInBackOffSinceUpdate(pl.Egress, now) {
			continue // the last write failed: wait before the next
		}
		cond := map[string]any{"type": crdv1.ConditionIPAssigned, "status": status, "reason": reason,
			"message": msg, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
		body, _ := json.Marshal(map[string]any{"apiVersion": crdv1.SchemeGroupVersion.String(), "kind": "Egress",
			"metadata": map[string]any{"name": pl.Egress}, "status": map[string]any{"egressNode": holder, "conditions": []any{cond}}})
		force := true
		if _, err := e.dyn.Resource(crdv1.EgressesResource).Patch(ctx, pl.Egress, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: FieldManager, Force: &force}, "status"); err != nil {
			e.statusBackoff.Next(pl.Egress, now)
			errs = append(errs, fmt.Errorf("Egress %s status (next try in %s): %w", pl.Egress, e.statusBackoff.Get(pl.Egress), err))
			continue
		}
		e.statusBackoff.Reset(pl.Egress)
		e.reported[pl.Egress] = k
		if holder == "" {
			e.log.Warn("Egress IP has no eligible live node", "egress", pl.Egress, "ips", ips)
			continue
		}
		e.log.Info("Egress IP assigned here", "egress", pl.Egress, "ips", ips, "pods", len(pl.Pods))
	}
	return errors.Join(errs...)
}

// joinAddrs is addresses as status messages write them: "a and b".
func joinAddrs(ips []netip.Addr) string {
	var s []string
	for _, ip := range ips {
		s = append(s, ip.String())
	}
	return strings.Join(s, " and ")
}

// joinAll contacts every known node and waits for the answers (a dead
// one costs at most memberlist's TCP timeout).
func (e *Egress) joinAll() {
	var addrs []string
	for _, o := range e.nodes.GetStore().List() {
		n := o.(*corev1.Node)
		if n.Name == e.self {
			continue
		}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && ip.Is4() {
				addrs = append(addrs, net.JoinHostPort(ip.String(), strconv.Itoa(e.cfg.MemberlistPort)))
				break
			}
		}
	}
	if len(addrs) == 0 {
		return
	}
	n, err := e.ml.Join(addrs)
	e.lastJoin = time.Now()
	e.log.Info("memberlist joined", "contacted", n, "of", len(addrs), "error", err)
}

// join asks memberlist to contact the nodes it does not know yet, at
// most every 2 s.
func (e *Egress) join(s Snapshot) {
	if time.Since(e.lastJoin) < 2*time.Second {
		return
	}
	var addrs []string
	for name, n := range s.Nodes {
		if name != e.self && !s.Alive[name] && n.IP.IsValid() {
			addrs = append(addrs, net.JoinHostPort(n.IP.String(), strconv.Itoa(e.cfg.MemberlistPort)))
		}
	}
	if len(addrs) == 0 {
		return
	}
	e.lastJoin = time.Now()
	go func() {
		if n, err := e.ml.Join(addrs); err != nil && n == 0 {
			e.log.Debug("memberlist join", "peers", addrs, "error", err)
		}
	}()
}
