package feature

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"switchyard.dev/switchyard/plugins/podnet/cnicode"
	"switchyard.dev/switchyard/plugins/podnet/flows"
	"switchyard.dev/switchyard/plugins/podnet/ipam"
	"switchyard.dev/switchyard/plugins/podnet/veth"
	"switchyard.dev/switchyard/plugins/podnet/warm"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Version of the plugin, reported in Describe.
const Version = "0.1.0"

// Config is podnet's section of the agent config.
type Config struct {
	// StateDir holds the IPAM store.
	StateDir string `json:"stateDir,omitempty"`
	// Gateway is the name of the gateway internal port.
	Gateway string `json:"gateway,omitempty"`
	// MTU of pod interfaces when the network config sets none; 0 takes the
	// node's MTU.
	MTU int `json:"mtu,omitempty"`
	// PodCIDRs override the node's spec.podCIDRs (static setups, tests).
	PodCIDRs []string `json:"podCIDRs,omitempty"`
	// WarmPorts is how many veth pairs podnet keeps attached to the
	// switch ahead of pods, 0 (off) to 64. An ADD that finds one ready
	// makes the pod's interface a macvlan on it, created inside the pod,
	// instead of waiting for ovs-vswitchd to attach a new port (see
	// package warm).
	WarmPorts int `json:"warmPorts,omitempty"`
}

// Defaults.
const (
	DefaultStateDir = "/var/lib/switchyard/podnet"
	DefaultGateway  = "sy-gw0"
	ipamNetwork     = "switchyard"
)

// Podnet implements sdk.Feature and sdk.CNIHandler.
type Podnet struct {
	// ops lets CNI calls run together and a node facts change (new pod
	// CIDR, new MTU) alone, so no ADD sees half a renumbering.
	ops sync.RWMutex
	// mu guards the fields set by Start. The host calls CNI and event
	// methods only after Start returned, so they need no "started yet?"
	// check.
	mu   sync.Mutex
	host sdk.Host
	log  *slog.Logger
	cfg  Config
	mtu  int
	// noTxCsum: the bridge uses the userspace datapath (see veth.Config).
	noTxCsum bool
	ipam     *ipam.Allocator
	gw       flows.Endpoint
	// claims say which warm pair each attachment took; read even with
	// the pool off, for pods that took one before it was turned off.
	claims warm.Claims
	// pool is nil when cfg.WarmPorts is 0.
	pool *warm.Pool
	// mtuNow is p.mtu for the pool's refill, which runs beside
	// NodeFactsChanged.
	mtuNow atomic.Int64
}

var (
	_ sdk.Feature             = (*Podnet)(nil)
	_ sdk.CNIHandler          = (*Podnet)(nil)
	_ sdk.Stopper             = (*Podnet)(nil)
	_ sdk.NodeFactsSubscriber = (*Podnet)(nil)
)

// New returns an unstarted podnet.
func New() *Podnet { return &Podnet{log: slog.Default()} }

// Describe declares podnet's tables.
func (p *Podnet) Describe(ctx context.Context, _ sdk.DescribeRequest, resp *sdk.DescribeResponse) error {
	resp.Name = "podnet"
	resp.Version = Version
	resp.Tables = flows.Tables()
	return nil
}

// ParseConfig reads podnet's config section and fills in the defaults.
func ParseConfig(raw []byte) (Config, error) {
	cfg := Config{StateDir: DefaultStateDir, Gateway: DefaultGateway}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return Config{}, fmt.Errorf("podnet config: %w", err)
		}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	if cfg.Gateway == "" {
		cfg.Gateway = DefaultGateway
	}
	if cfg.WarmPorts < 0 || cfg.WarmPorts > maxWarmPorts {
		return Config{}, fmt.Errorf("podnet config warmPorts: %d is out of range; set 0 (no warm ports) to %d", cfg.WarmPorts, maxWarmPorts)
	}
	return cfg, nil
}

// Start sets up IPAM and the gateway, re-installs the flows of every pod
// attached before a restart, and reports synced.
func (p *Podnet) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	cfg, err := ParseConfig(req.Config)
	if err != nil {
		return err
	}
	cidrs := req.Node.PodCIDRs
	if len(cfg.PodCIDRs) > 0 {
		cidrs = nil
		for _, s := range cfg.PodCIDRs {
			c, err := netip.ParsePrefix(s)
			if err != nil {
				return fmt.Errorf("podnet config podCIDRs: %w", err)
			}
			cidrs = append(cidrs, c)
		}
	}
	log := req.Host.Logger()
	al, err := ipam.New(filepath.Join(cfg.StateDir, "ipam"), ipamNetwork, cidrs)
	if err != nil {
		return err
	}
	dropOldRecords(cfg.StateDir, log)
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = nodePodMTU(req.Node)
	}
	// The gateway is exported: other features (the tunnel delivering to
	// the node, egress, service) send packets to it too. Pod ports stay
	// podnet's own.
	gwPort, err := req.Host.CreatePort(ctx, sdk.PortRequest{Name: cfg.Gateway, Type: "internal", Exported: true,
		ExternalIDs: map[string]string{"switchyard.dev/role": "gateway"}})
	if err != nil {
		al.Close()
		return fmt.Errorf("creating gateway port %s: %w", cfg.Gateway, err)
	}
	gwMAC := req.Node.GatewayMAC
	if len(gwMAC) != 6 {
		gwMAC = stableMAC(al.Gateways())
	}
	if err := configureGateway(cfg.Gateway, gwMAC, al.CIDRs(), al.Gateways(), mtu); err != nil {
		al.Close()
		return err
	}
	p.mu.Lock()
	p.host, p.log, p.cfg, p.mtu, p.ipam = req.Host, log, cfg, mtu, al
	// The userspace datapath forwards packets as it reads them: a checksum
	// left to "whoever transmits" arrives unfilled, unless ovs-vswitchd
	// takes such packets with their offload state (userspace TSO).
	p.noTxCsum = req.Node.DatapathType == "netdev" && !req.Node.UserspaceTSO
	p.gw = flows.Endpoint{OFPort: gwPort.OFPort, MAC: gwMAC, IPs: al.Gateways()}
	p.claims = warm.Claims{Dir: filepath.Join(cfg.StateDir, "warm-claims")}
	p.mtuNow.Store(int64(mtu))
	p.mu.Unlock()

	pods, onWarm, err := p.resync(ctx, req.Attachments)
	if err != nil {
		return err
	}
	if err := p.openPool(ctx); err != nil {
		// Pods still get ports, each its own, as without a pool.
		log.Warn("warm port pool not started; every ADD creates its own port", "error", err)
	} else if p.pool != nil {
		// A podnet that stopped between an ADD and the pool's next quiet
		// moment never named that pod on its warm port: name every pod on
		// a warm port again (the host leaves a port labelled already as
		// it is, without a transaction).
		for port, ids := range onWarm {
			p.pool.Label(port, ids)
		}
	}
	log.Info("podnet started", "pod_cidrs", al.CIDRs(), "gateway", cfg.Gateway, "gateway_ofport", gwPort.OFPort,
		"gateway_mac", gwMAC, "pods", pods, "warm_ports", cfg.WarmPorts)
	return req.Host.Synced(ctx)
}

// resync installs the static and gateway flows and those of every pod the
// host recorded, in one batch, and reconciles IPAM with the host's record:
// an allocation the host has no record of is an ADD cut short (the host
// records an attachment only after podnet's ADD returned), so its
// addresses, veth, port and flows go. It returns how many pods it wired.
//
// onWarm names, by warm port, the pods that are on one: the external_ids
// that name the pod on it.
func (p *Podnet) resync(ctx context.Context, recorded []sdk.PodInterface) (wired int, onWarm map[string]map[string]string, err error) {
	allocs, err := p.ipam.Allocations()
	if err != nil {
		return 0, nil, err
	}
	onWarm = map[string]map[string]string{}
	byKey := make(map[ipam.Key]sdk.PodInterface, len(recorded))
	for _, r := range recorded {
		byKey[ipam.Key{ContainerID: r.ContainerID, IfName: r.IfName}] = r
	}
	b := flow.NewBatch().AddFlows(flows.StaticFlows()...).AddFlows(flows.GatewayFlows(p.gw)...)
	var leaked []ipam.Key
	for _, k := range sortedKeys(allocs) {
		rec, ok := byKey[k]
		if !ok {
			leaked = append(leaked, k)
			continue
		}
		delete(byKey, k)
		pod := rec.PodNamespace + "/" + rec.PodName
		if !sameAddrs(allocs[k], rec.IPs) {
			p.log.Warn("the host's record and IPAM disagree on a pod's addresses; its flows follow IPAM, which holds them",
				"pod", pod, "container", k.ContainerID, "recorded", rec.IPs, "ipam", allocs[k])
		}
		at, err := p.derive(ctx, k, allocs[k])
		if err != nil {
			p.log.Warn("pod's OVS port is gone; its flows are not re-installed until it is deleted and added again",
				"pod", pod, "container", k.ContainerID, "port", at.hostIf, "error", err)
			continue
		}
		if at.ofport != rec.OFPort {
			p.log.Info("pod port renumbered while podnet was down", "pod", pod, "old", rec.OFPort, "new", at.ofport)
		}
		b.AddFlows(flows.PodFlows(p.gw, at.endpoint())...)
		wired++
		if at.lower != "" {
			onWarm[at.hostIf] = podExternalIDs(sdk.CNIArgs{ContainerID: rec.ContainerID, PodNamespace: rec.PodNamespace, PodName: rec.PodName})
		}
	}
	if err := p.dropStaleClaims(allocs); err != nil {
		return 0, nil, err
	}
	for k, rec := range byKey {
		p.log.Warn("the host records a pod podnet holds no addresses for; DEL and ADD its sandbox to repair it",
			"pod", rec.PodNamespace+"/"+rec.PodName, "container", k.ContainerID, "ifname", k.IfName, "ips", rec.IPs)
	}
	if err := p.host.Apply(ctx, b); err != nil {
		return 0, nil, fmt.Errorf("installing podnet flows: %w", err)
	}
	for _, k := range leaked {
		p.log.Warn("removing an attachment the host has no record of (an ADD cut short)", "container", k.ContainerID, "ifname", k.IfName, "ips", allocs[k])
		if err := p.detach(ctx, sdk.CNIArgs{ContainerID: k.ContainerID, IfName: k.IfName}); err != nil {
			return 0, nil, err
		}
	}
	return wired, onWarm, nil
}

// attachment is one pod interface as podnet finds it: its addresses
// (IPAM, by attachment), the names and MAC derived from them, and its OVS
// port. Podnet keeps no record of its own; the host's is the one record.
type attachment struct {
	hostIf string
	// lower is the warm pair's lower end when the pod took one (its
	// interface is a macvlan on it), else "".
	lower string
	ips   []netip.Addr
	mac   net.HardwareAddr
	// ofport is 0 when OVS has no port of that name, or has not attached
	// it. requested is the number the port was created with: the ADD's
	// flows name it, and a port the switch could not attach, or numbered
	// otherwise, has flows under it all the same.
	ofport, requested uint32
}

// tags are the flow tags the attachment's flows may carry.
func (a attachment) tags() []uint32 {
	var out []uint32
	for _, t := range []uint32{a.ofport, a.requested} {
		if t != 0 && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// derive finds attachment k, which holds ips; the error says why its OVS
// port could not be found (the attachment is returned all the same).
func (p *Podnet) derive(ctx context.Context, k ipam.Key, ips []netip.Addr) (attachment, error) {
	at := attachment{hostIf: HostIfName(k.ContainerID, k.IfName), ips: ips, mac: stableMAC(ips)}
	pair, err := p.claims.Read(at.hostIf)
	if err != nil {
		return at, err
	}
	if pair != "" {
		at.hostIf, at.lower = pair, veth.LowerName(pair)
	}
	port, err := p.host.Port(ctx, at.hostIf)
	if err != nil {
		return at, err
	}
	at.ofport, at.requested = port.OFPort, port.OFPortRequest
	return at, nil
}

func (a attachment) endpoint() flows.Endpoint {
	return flows.Endpoint{OFPort: a.ofport, MAC: a.mac, IPs: a.ips}
}

// attached lists every attachment IPAM holds addresses for, with its port.
func (p *Podnet) attached(ctx context.Context) ([]attachment, error) {
	allocs, err := p.ipam.Allocations()
	if err != nil {
		return nil, err
	}
	out := make([]attachment, 0, len(allocs))
	for _, k := range sortedKeys(allocs) {
		at, err := p.derive(ctx, k, allocs[k])
		if err != nil && !errors.Is(err, sdk.ErrNotFound) {
			return nil, fmt.Errorf("looking up OVS port %s: %w", at.hostIf, err)
		}
		out = append(out, at)
	}
	return out, nil
}

func sortedKeys[V any](m map[ipam.Key]V) []ipam.Key {
	return slices.SortedFunc(maps.Keys(m), func(a, b ipam.Key) int {
		if c := strings.Compare(a.ContainerID, b.ContainerID); c != 0 {
			return c
		}
		return strings.Compare(a.IfName, b.IfName)
	})
}

func sameAddrs(a, b []netip.Addr) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, netip.Addr.Compare)
	slices.SortFunc(b, netip.Addr.Compare)
	return slices.Equal(a, b)
}

// dropOldRecords removes the pod records earlier versions kept beside
// IPAM (pods.json): the host's record replaced them.
func dropOldRecords(stateDir string, log *slog.Logger) {
	path := filepath.Join(stateDir, "pods.json")
	if err := os.Remove(path); err == nil {
		log.Info("removed the pod records of an earlier podnet; the host's record replaces them", "path", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		log.Warn("could not remove the pod records of an earlier podnet", "path", path, "error", err)
	}
}

// Stop closes the IPAM store. Interfaces and flows stay: pods keep working
// while the plugin restarts.
func (p *Podnet) Stop(ctx context.Context, req sdk.StopRequest, _ *sdk.StopResponse) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	if p.pool != nil {
		// A podnet that restarts leaves its ready pairs to the next one,
		// so a restart changes nothing on the switch; an unloaded one
		// removes them. Pods keep the pairs they took either way.
		errs = append(errs, p.pool.Close(ctx, req.Unload))
	}
	if p.ipam != nil {
		errs = append(errs, p.ipam.Close())
	}
	return errors.Join(errs...)
}

// HostIfName is the host end's name for an attachment: derived, so DEL can
// find it even without a record, and short enough for IFNAMSIZ.
func HostIfName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifName))
	return "sy" + hex.EncodeToString(sum[:])[:11]
}

// stableMAC derives a locally administered unicast MAC from the first IPv4
// address (0a:58 + the address, the convention other CNIs use too), or from
// a hash of the IPv6 one, so a pod keeps its MAC for its IP.
func stableMAC(ips []netip.Addr) net.HardwareAddr {
	for _, ip := range ips {
		if ip.Is4() {
			b := ip.As4()
			return net.HardwareAddr{0x0a, 0x58, b[0], b[1], b[2], b[3]}
		}
	}
	for _, ip := range ips {
		b := ip.As16()
		sum := sha256.Sum256(b[:])
		return net.HardwareAddr{0x0a, 0x58, sum[0], sum[1], sum[2], sum[3]}
	}
	return nil
}

func configureGateway(name string, mac net.HardwareAddr, cidrs []netip.Prefix, gws []netip.Addr, mtu int) error {
	var link netlink.Link
	var err error
	// ovs-vswitchd creates the device asynchronously after the port row.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if link, err = netlink.LinkByName(name); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway device %s did not appear within 10s after creating its OVS port: %w", name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if link.Attrs().HardwareAddr.String() != mac.String() {
		if err := netlink.LinkSetHardwareAddr(link, mac); err != nil {
			return fmt.Errorf("setting gateway %s MAC %s: %w", name, mac, err)
		}
	}
	if link.Attrs().MTU != mtu {
		if err := netlink.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("setting gateway %s MTU %d: %w", name, mtu, err)
		}
	}
	for i, gw := range gws {
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(gw.AsSlice()), Mask: net.CIDRMask(cidrs[i].Bits(), gw.BitLen())}}
		if gw.Is6() {
			addr.Flags = 0x02 // IFA_F_NODAD: the gateway address is ours by construction
		}
		if err := netlink.AddrReplace(link, addr); err != nil {
			return fmt.Errorf("assigning %s to gateway %s: %w", addr.IPNet, name, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting gateway %s up: %w", name, err)
	}
	return nil
}

// nodePodMTU is the MTU the host publishes for pods (the uplink's less the
// largest declared encapsulation overhead).
func nodePodMTU(n sdk.NodeFacts) int {
	switch {
	case n.PodMTU > 0:
		return n.PodMTU
	case n.MTU > 0:
		return n.MTU
	}
	return 1500
}

// NodeFactsChanged follows the host: a new pod MTU applies to the gateway
// and to pods created from now on (running pods keep theirs); a new pod
// CIDR renumbers the gateway (its old address is removed) and IPAM.
// Overrides in podnet's own config win over the node's facts.
func (p *Podnet) NodeFactsChanged(ctx context.Context, req sdk.NodeFactsChangedRequest, _ *sdk.NodeFactsChangedResponse) error {
	p.ops.Lock()
	defer p.ops.Unlock()
	var errs []error
	if p.cfg.MTU == 0 {
		if mtu := nodePodMTU(req.New); mtu != p.mtu {
			if err := setGatewayMTU(p.cfg.Gateway, mtu); err != nil {
				errs = append(errs, err)
			} else {
				p.log.Info("pod MTU changed; pods created from now on get it", "mtu", mtu, "old_mtu", p.mtu)
				p.mtu = mtu
				p.mtuNow.Store(int64(mtu))
				if p.pool != nil {
					// So the next ADD finds a pair of the new MTU ready.
					p.pool.Retune()
				}
			}
		}
	}
	if len(p.cfg.PodCIDRs) == 0 && len(req.New.PodCIDRs) > 0 && !slices.Equal(maskAll(req.New.PodCIDRs), p.ipam.CIDRs()) {
		if err := p.renumber(ctx, maskAll(req.New.PodCIDRs)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func maskAll(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = p.Masked()
	}
	return out
}

// renumber moves podnet to new pod CIDRs: IPAM allocates from them, the
// gateway gets their gateway addresses and loses the old ones, and the
// gateway's and every recorded pod's flows are rewritten in one batch.
// Pods attached before keep their addresses until they are deleted. The
// gateway MAC stays, so running pods' neighbour entries stay valid.
func (p *Podnet) renumber(ctx context.Context, cidrs []netip.Prefix) error {
	old := p.ipam
	oldCIDRs, oldGW := old.CIDRs(), p.gw
	pods, err := p.attached(ctx)
	if err != nil {
		return fmt.Errorf("listing pods to rewrite for pod CIDRs %v: %w", cidrs, err)
	}
	// The store is one directory; the old allocator must let go of it
	// before the new one opens it.
	if err := old.Close(); err != nil {
		return fmt.Errorf("closing IPAM for %v: %w", oldCIDRs, err)
	}
	al, err := ipam.New(filepath.Join(p.cfg.StateDir, "ipam"), ipamNetwork, cidrs)
	if err != nil {
		if back, e := ipam.New(filepath.Join(p.cfg.StateDir, "ipam"), ipamNetwork, oldCIDRs); e == nil {
			p.ipam = back
		}
		return fmt.Errorf("new pod CIDRs %v: %w", cidrs, err)
	}
	newGW := flows.Endpoint{OFPort: oldGW.OFPort, MAC: oldGW.MAC, IPs: al.Gateways()}
	if err := unassignGateway(p.cfg.Gateway, oldCIDRs, oldGW.IPs); err != nil {
		p.log.Warn("could not remove the old gateway address", "gateway", p.cfg.Gateway, "error", err)
	}
	if err := configureGateway(p.cfg.Gateway, newGW.MAC, al.CIDRs(), al.Gateways(), p.mtu); err != nil {
		al.Close()
		return err
	}
	b := flow.NewBatch().DeleteFlows(flows.GatewayFlows(oldGW)...).AddFlows(flows.GatewayFlows(newGW)...)
	for _, at := range pods {
		if at.ofport != 0 {
			b.DeleteFlows(flows.PodFlows(oldGW, at.endpoint())...).AddFlows(flows.PodFlows(newGW, at.endpoint())...)
		}
	}
	if err := p.host.Apply(ctx, b); err != nil {
		al.Close()
		return fmt.Errorf("rewriting flows for pod CIDRs %v: %w", cidrs, err)
	}
	p.ipam, p.gw = al, newGW
	p.log.Info("pod CIDRs changed; gateway renumbered", "pod_cidrs", cidrs, "old_pod_cidrs", oldCIDRs,
		"gateway_ips", newGW.IPs, "old_gateway_ips", oldGW.IPs, "pods_kept", len(pods))
	return nil
}

func setGatewayMTU(name string, mtu int) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("gateway %s: %w", name, err)
	}
	if err := netlink.LinkSetMTU(link, mtu); err != nil {
		return fmt.Errorf("setting gateway %s MTU %d: %w", name, mtu, err)
	}
	return nil
}

// unassignGateway removes the gateway addresses of old pod CIDRs.
func unassignGateway(name string, cidrs []netip.Prefix, gws []netip.Addr) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	var errs []error
	for i, gw := range gws {
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(gw.AsSlice()), Mask: net.CIDRMask(cidrs[i].Bits(), gw.BitLen())}}
		if err := netlink.AddrDel(link, addr); err != nil && !errors.Is(err, syscall.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("removing %s from %s: %w", addr.IPNet, name, err))
		}
	}
	return errors.Join(errs...)
}

// podMTU picks the MTU: the network config's (the host parsed it into
// the request), else podnet's config or the node's.
func (p *Podnet) podMTU(a sdk.CNIArgs) int {
	if a.MTU != 0 {
		return a.MTU
	}
	return p.mtu
}

// CNIAdd wires a pod: addresses, veth, OVS port, flows. The host checks
// that the attachment is not already there, records it once this returns,
// and on any error calls CNIDel (detach) to remove what was done: one
// duplicate check, one record and one rollback, all in the host.
func (p *Podnet) CNIAdd(ctx context.Context, req sdk.CNIAddRequest, resp *sdk.CNIAddResponse) (err error) {
	p.ops.RLock()
	defer p.ops.RUnlock()
	a := req.Args
	key := ipam.Key{ContainerID: a.ContainerID, IfName: a.IfName}
	log := p.log.With("pod", a.PodNamespace+"/"+a.PodName, "container", a.ContainerID)
	hostIf := HostIfName(a.ContainerID, a.IfName)
	defer func() {
		if err != nil {
			log.Error("pod ADD failed; the host rolls it back with a DEL", "error", err)
		}
	}()

	t0 := time.Now()
	var phases []any
	phase := func(name string) {
		now := time.Now()
		phases = append(phases, name, now.Sub(t0).Round(10*time.Microsecond).String())
		t0 = now
	}
	if held := p.ipam.Get(key); len(held) > 0 {
		// The host has no record of it (its duplicate check passed), so
		// this is an earlier ADD cut short by a crash: start clean.
		log.Warn("removing what an earlier ADD of this attachment left (cut short)", "ips", held)
		if err := p.detach(ctx, a); err != nil {
			return fmt.Errorf("removing what an earlier ADD of %s/%s left: %w", a.ContainerID, a.IfName, err)
		}
	}
	leases, held, err := p.ipam.AllocateNew(key)
	if err == nil && len(held) > 0 {
		err = fmt.Errorf("ipam: %s/%s holds %v although its leftovers were just removed", a.ContainerID, a.IfName, held)
	}
	if err != nil {
		return err
	}
	var ips []netip.Addr
	for _, l := range leases {
		ips = append(ips, l.Address.Addr())
	}
	mac := stableMAC(ips)
	mtu := p.podMTU(a)
	vc := veth.Config{Netns: a.Netns, IfName: a.IfName, HostIfName: hostIf, MTU: mtu, MAC: mac, Addrs: ips, Gateways: p.gw.IPs,
		NoTxChecksum: p.noTxCsum}
	phase("ipam")
	var ofport uint32
	var nflows int
	if p.pool != nil {
		// Once this ADD is done with the switch, whether it took a pair
		// or found none ready.
		defer p.pool.Refill()
	}
	if wp, ok := p.takeWarm(log, hostIf, mtu); ok {
		hostIf, vc.HostIfName, vc.LowerIfName = wp.Name, wp.Name, veth.LowerName(wp.Name)
		ofport = wp.OFPort
		nflows, err = p.adoptWarm(ctx, vc, ofport, phase)
		if err == nil {
			p.pool.Label(hostIf, podExternalIDs(a))
		}
	} else {
		ofport, nflows, err = p.attachNew(ctx, a, vc, phase)
	}
	if err != nil {
		return err
	}
	for _, ip := range ips {
		if ip.Is4() {
			if e := veth.GratuitousARP(a.Netns, a.IfName, mac, ip); e != nil {
				log.Warn("gratuitous ARP failed; neighbours learn the MAC on first contact instead", "error", e)
			}
		}
	}
	*resp = sdk.CNIAddResponse{MTU: mtu, Interface: sdk.PodInterface{
		PodNamespace: a.PodNamespace, PodName: a.PodName, ContainerID: a.ContainerID,
		IfName: a.IfName, HostIfName: hostIf, OFPort: ofport, MAC: mac, IPs: ips,
	}}
	for _, l := range leases {
		resp.IPs = append(resp.IPs, sdk.IPConfig{Address: netip.PrefixFrom(l.Address.Addr(), l.Address.Addr().BitLen()), Gateway: l.Gateway})
		def := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if l.Gateway.Is6() {
			def = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		resp.Routes = append(resp.Routes, sdk.Route{Dst: def, GW: l.Gateway})
	}
	phase("garp")
	log.Info("pod attached", append([]any{"ips", ips, "mac", mac, "port", hostIf, "ofport", ofport, "flows", nflows, "warm", hostIf != HostIfName(a.ContainerID, a.IfName)}, phases...)...)
	return nil
}

// attachNew creates the pod's veth and OVS port, installs its flows and
// waits until the switch has attached the port. It returns the port's
// number and how many flows went in.
func (p *Podnet) attachNew(ctx context.Context, a sdk.CNIArgs, vc veth.Config, phase func(string)) (uint32, int, error) {
	hostIf := vc.HostIfName
	if err := veth.Create(vc); err != nil {
		return 0, 0, &sdk.CNIError{Code: cnicode.Interface, Msg: fmt.Sprintf("creating the pod interface: %v", err), Details: "check that the pod's network namespace is usable and no stale interface holds the name"}
	}
	phase("veth")
	// The OVSDB transaction for the port (about 2 ms) overlaps the pod
	// end's addresses and routes. The port's number is known once OVSDB
	// has the port; ovs-vswitchd attaches it (its userspace datapath takes
	// longer the more ports the bridge has: about 2 ms at 10, 10 ms at
	// 100) while the flows go in, and WaitPort confirms the attach before
	// the ADD answers.
	type createdPort struct {
		port sdk.Port
		err  error
	}
	portc := make(chan createdPort, 1)
	go func() {
		port, err := p.host.CreatePort(ctx, sdk.PortRequest{Name: hostIf, NoWait: true, ExternalIDs: podExternalIDs(a)})
		portc <- createdPort{port, err}
	}()
	vethErr := veth.Configure(vc)
	phase("configure")
	// The port request has ended before the ADD returns, so the host's
	// rollback sees the port if it exists.
	created := <-portc
	if vethErr != nil {
		return 0, 0, &sdk.CNIError{Code: cnicode.Interface, Msg: fmt.Sprintf("configuring the pod interface: %v", vethErr), Details: "check that the pod's network namespace is usable"}
	}
	if created.err != nil {
		return 0, 0, &sdk.CNIError{Code: cnicode.Switch, Msg: fmt.Sprintf("creating OVS port %s: %v", hostIf, created.err), Details: "check that ovs-vswitchd is running on the node"}
	}
	port := created.port
	phase("ovs_port")
	n, err := p.installPodFlows(ctx, hostIf, port.OFPort, vc)
	if err != nil {
		return 0, 0, err
	}
	phase("flows")
	if _, err := p.host.WaitPort(ctx, hostIf); err != nil {
		return 0, 0, &sdk.CNIError{Code: cnicode.Switch, Msg: fmt.Sprintf("attaching OVS port %s (ofport %d): %v", hostIf, port.OFPort, err), Details: "check the ovs-vswitchd log for the port"}
	}
	phase("attach")
	return port.OFPort, n, nil
}

func (p *Podnet) installPodFlows(ctx context.Context, hostIf string, ofport uint32, vc veth.Config) (int, error) {
	podFlows := flows.PodFlows(p.gw, flows.Endpoint{OFPort: ofport, MAC: vc.MAC, IPs: vc.Addrs})
	if err := p.host.Apply(ctx, flow.NewBatch().AddFlows(podFlows...)); err != nil {
		return 0, &sdk.CNIError{Code: cnicode.Switch, Msg: fmt.Sprintf("installing flows for OVS port %s (ofport %d): %v", hostIf, ofport, err), Details: "see the agent log for the refused flow"}
	}
	return len(podFlows), nil
}

// takeWarm takes a ready warm pair for the attachment whose derived name
// is hostIf, recording the claim first; false sends the ADD down the cold
// path (no pool, none ready, or the claim could not be written).
func (p *Podnet) takeWarm(log *slog.Logger, hostIf string, mtu int) (warm.Port, bool) {
	if p.pool == nil {
		return warm.Port{}, false
	}
	wp, ok, err := p.pool.Take(mtu, func(pair string) error { return p.claims.Write(hostIf, pair) })
	if err != nil {
		log.Warn("could not take a warm port; creating one for this pod", "error", err)
	}
	return wp, ok
}

// podExternalIDs name the pod on its OVS port, for operators.
func podExternalIDs(a sdk.CNIArgs) map[string]string {
	return map[string]string{"switchyard.dev/pod": a.PodNamespace + "/" + a.PodName, "switchyard.dev/container": a.ContainerID}
}

// adoptWarm makes the pod's interface on a warm pair while the pod's
// flows go in: the port is attached already, so neither waits for
// ovs-vswitchd to attach anything.
func (p *Podnet) adoptWarm(ctx context.Context, vc veth.Config, ofport uint32, phase func(string)) (int, error) {
	type installed struct {
		n   int
		err error
	}
	flowsc := make(chan installed, 1)
	go func() {
		n, err := p.installPodFlows(ctx, vc.HostIfName, ofport, vc)
		flowsc <- installed{n, err}
	}()
	adoptErr := veth.Adopt(vc)
	phase("adopt")
	fl := <-flowsc
	phase("flows")
	if adoptErr != nil {
		return 0, &sdk.CNIError{Code: cnicode.Interface, Msg: fmt.Sprintf("creating the pod interface on warm port %s: %v", vc.HostIfName, adoptErr), Details: "check that the pod's network namespace is usable and no interface in it holds the name"}
	}
	return fl.n, fl.err
}

// maxWarmPorts bounds the pool: each ready pair is a port ovs-vswitchd
// re-reads on every port change.
const maxWarmPorts = 64

// openPool starts the warm pool when the config asks for one.
func (p *Podnet) openPool(ctx context.Context) error {
	claimed, err := p.claims.All()
	if err != nil {
		return err
	}
	pairs := make(map[string]bool, len(claimed))
	for _, pair := range claimed {
		pairs[pair] = true
	}
	labeler, _ := p.host.(sdk.PortLabeler)
	o := warm.Options{Size: p.cfg.WarmPorts, Dir: filepath.Join(p.cfg.StateDir, "warm-ports"), Host: p.host, Log: p.log, Labeler: labeler,
		NoTxChecksum: p.noTxCsum, MTU: func() int { return int(p.mtuNow.Load()) }, Claimed: func(name string) bool { return pairs[name] }}
	if p.cfg.WarmPorts == 0 {
		// A pool that was on before: sweep what it left.
		if _, err := os.Stat(o.Dir); err == nil {
			return warm.Sweep(ctx, o)
		}
		return nil
	}
	pool, err := warm.Open(ctx, o)
	if err != nil {
		return fmt.Errorf("warm port pool: %w", err)
	}
	p.mu.Lock()
	p.pool = pool
	p.mu.Unlock()
	return nil
}

// dropStaleClaims forgets the claims of attachments IPAM no longer holds
// addresses for (their DEL finished, or never will).
func (p *Podnet) dropStaleClaims(allocs map[ipam.Key][]netip.Addr) error {
	claimed, err := p.claims.All()
	if err != nil {
		return err
	}
	held := make(map[string]bool, len(allocs))
	for k := range allocs {
		held[HostIfName(k.ContainerID, k.IfName)] = true
	}
	var errs []error
	for att, pair := range claimed {
		if !held[att] {
			p.log.Info("forgetting the warm port claim of an attachment that holds no addresses", "attachment", att, "port", pair)
			errs = append(errs, p.claims.Remove(att))
		}
	}
	return errors.Join(errs...)
}

// CNIDel unwires a pod, or undoes what a failed ADD did (the host's
// rollback); it succeeds when nothing is left.
func (p *Podnet) CNIDel(ctx context.Context, req sdk.CNIDelRequest, _ *sdk.CNIDelResponse) error {
	p.ops.RLock()
	defer p.ops.RUnlock()
	return p.detach(ctx, req.Args)
}

// CNIGC removes every attachment podnet holds addresses for that the
// runtime no longer lists. The host has already
// detached the ones it recorded; what is left here is what it never
// recorded: an ADD cut short by an agent crash, whose veth, port,
// addresses and flows would otherwise stay forever.
func (p *Podnet) CNIGC(ctx context.Context, req sdk.CNIGCRequest, resp *sdk.CNIGCResponse) error {
	// Exclusive: no ADD or DEL may run while the sets are compared.
	p.ops.Lock()
	defer p.ops.Unlock()
	valid := map[ipam.Key]bool{}
	for _, a := range req.Valid {
		valid[ipam.Key{ContainerID: a.ContainerID, IfName: a.IfName}] = true
	}
	allocs, err := p.ipam.Allocations()
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range sortedKeys(allocs) {
		if valid[k] {
			continue
		}
		p.log.Warn("CNI GC: removing an attachment the runtime no longer lists", "container", k.ContainerID, "ifname", k.IfName, "ips", allocs[k])
		// Without the netns (the sandbox is gone), the veth goes with the
		// host end.
		if err := p.detach(ctx, sdk.CNIArgs{ContainerID: k.ContainerID, IfName: k.IfName}); err != nil {
			errs = append(errs, err)
			continue
		}
		resp.Removed++
	}
	return errors.Join(errs...)
}

// detach removes everything of one attachment: its flows, OVS port, veth
// and addresses, found by the names derived from the attachment. It
// succeeds when nothing is left, so it is the rollback of a failed ADD too.
func (p *Podnet) detach(ctx context.Context, a sdk.CNIArgs) error {
	key := ipam.Key{ContainerID: a.ContainerID, IfName: a.IfName}
	log := p.log.With("pod", a.PodNamespace+"/"+a.PodName, "container", a.ContainerID)
	at, perr := p.derive(ctx, key, p.ipam.Get(key))
	var errs []error
	if perr != nil && !errors.Is(perr, sdk.ErrNotFound) {
		errs = append(errs, fmt.Errorf("looking up OVS port %s: %w", at.hostIf, perr))
	}
	flowsDone := make(chan error, 1)
	if tags := at.tags(); len(tags) > 0 {
		// Every flow of the pod carries its ofport as the tag: delete them
		// by tag, whatever they were computed from when the pod was added.
		// The switch does that while the port and the veth go (the host
		// never hands the number out again soon), but before the addresses
		// are free: a new pod given one of them installs flows of the same
		// match.
		go func() {
			b := flow.NewBatch()
			for _, t := range tags {
				b.DeleteTagged("", t, ^uint32(0))
			}
			err := p.host.Apply(ctx, b)
			if err != nil && !errors.Is(err, sdk.ErrNotFound) {
				err = fmt.Errorf("deleting flows: %w", err)
			} else {
				err = nil
			}
			flowsDone <- err
		}()
	} else {
		flowsDone <- nil
	}
	if err := p.host.DeletePort(ctx, at.hostIf); err != nil && !errors.Is(err, sdk.ErrNotFound) {
		errs = append(errs, fmt.Errorf("deleting OVS port %s: %w", at.hostIf, err))
	}
	if err := veth.Teardown(a.Netns, a.IfName, at.hostIf); err != nil {
		errs = append(errs, err)
	}
	if err := <-flowsDone; err != nil {
		errs = append(errs, err)
	} else if err := p.ipam.Release(key); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		errs = append(errs, p.claims.Remove(HostIfName(a.ContainerID, a.IfName)))
	}
	if err := errors.Join(errs...); err != nil {
		log.Error("pod DEL incomplete; the runtime will retry", "error", err)
		return err
	}
	log.Info("pod detached", "port", at.hostIf, "ips", at.ips, "ofport", at.ofport)
	return nil
}

// CNICheck verifies the interface, addresses, routes, OVS port and IPAM
// allocation, and lists everything that is missing.
func (p *Podnet) CNICheck(ctx context.Context, req sdk.CNICheckRequest, _ *sdk.CNICheckResponse) error {
	p.ops.RLock()
	defer p.ops.RUnlock()
	a := req.Args
	key := ipam.Key{ContainerID: a.ContainerID, IfName: a.IfName}
	held := p.ipam.Get(key)
	if len(held) == 0 {
		return &sdk.CNIError{Code: cnicode.CheckFailed, Msg: fmt.Sprintf("podnet holds no addresses for %s in container %s", a.IfName, a.ContainerID), Details: "DEL and ADD the sandbox again"}
	}
	at, err := p.derive(ctx, key, held)
	// Only a network config's MTU binds a running pod: one taken from the
	// node applies to pods created after it changed.
	problems := veth.Check(veth.Config{Netns: a.Netns, IfName: a.IfName, HostIfName: at.hostIf, LowerIfName: at.lower, MTU: a.MTU,
		MAC: at.mac, Addrs: held, Gateways: p.gw.IPs})
	if err != nil {
		problems = append(problems, fmt.Sprintf("OVS port %s is missing (%v)", at.hostIf, err))
	}
	want := flows.PodFlows(p.gw, at.endpoint())
	for _, f := range want {
		if err := f.Validate(); err != nil {
			problems = append(problems, fmt.Sprintf("flow %s is invalid: %v", f.String(), err))
		}
	}
	if at.ofport != 0 {
		problems = append(problems, p.checkFlowsOnSwitch(ctx, at.ofport, want)...)
	}
	if len(problems) > 0 {
		return &sdk.CNIError{Code: cnicode.CheckFailed, Msg: fmt.Sprintf("pod %s/%s is not wired correctly: %s", a.PodNamespace, a.PodName, strings.Join(problems, "; ")), Details: "DEL and ADD the sandbox again to repair it"}
	}
	return nil
}

// checkFlowsOnSwitch reads the pod's flows back from the switch (they
// carry the pod's ofport as their tag) and names every wanted flow that
// is missing or holds other actions. Jumps are not compared: the switch
// holds them resolved to a table, the plugin writes them by stage.
func (p *Podnet) checkFlowsOnSwitch(ctx context.Context, tag uint32, want []flow.Flow) []string {
	got, err := p.host.Flows(ctx, sdk.FlowFilter{Tag: tag, TagMask: ^uint32(0)})
	if err != nil {
		return []string{fmt.Sprintf("cannot read the pod's flows back from the switch: %v", err)}
	}
	have := make(map[flow.Key]flow.Flow, len(got))
	for _, s := range got {
		have[s.Flow.Key()] = s.Flow
	}
	var problems []string
	for _, f := range want {
		g, ok := have[f.Key()]
		if !ok {
			problems = append(problems, fmt.Sprintf("flow %s is not on the switch", f.String()))
			continue
		}
		if a, b := actionsText(f.Actions), actionsText(g.Actions); a != b {
			problems = append(problems, fmt.Sprintf("flow %s holds actions %s on the switch, want %s", f.Key(), b, a))
		}
	}
	return problems
}

func actionsText(as []flow.Action) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.String()
	}
	return strings.Join(parts, ",")
}
