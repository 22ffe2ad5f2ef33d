package feature

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"switchyard.dev/switchyard/cni/netconf"
	"switchyard.dev/switchyard/plugins/podnet/cnicode"
	"switchyard.dev/switchyard/plugins/podnet/flows"
	"switchyard.dev/switchyard/plugins/podnet/ipam"
	"switchyard.dev/switchyard/plugins/podnet/veth"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Version of the plugin, reported in Describe.
const Version = "0.1.0"

// Config is podnet's section of the agent config.
type Config struct {
	// StateDir holds the IPAM store and podnet's pod records.
	StateDir string `json:"stateDir,omitempty"`
	// Gateway is the name of the gateway internal port.
	Gateway string `json:"gateway,omitempty"`
	// MTU of pod interfaces when the network config sets none; 0 takes the
	// node's MTU.
	MTU int `json:"mtu,omitempty"`
	// PodCIDRs override the node's spec.podCIDRs (static setups, tests).
	PodCIDRs []string `json:"podCIDRs,omitempty"`
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
	st       *state
	gw       flows.Endpoint
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

// Start sets up IPAM and the gateway, re-installs the flows of every pod
// attached before a restart, and reports synced.
func (p *Podnet) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	cfg := Config{StateDir: DefaultStateDir, Gateway: DefaultGateway}
	if len(req.Config) > 0 && string(req.Config) != "null" {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return fmt.Errorf("podnet config: %w", err)
		}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	if cfg.Gateway == "" {
		cfg.Gateway = DefaultGateway
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
	st, err := openState(filepath.Join(cfg.StateDir, "pods.json"))
	if err != nil {
		al.Close()
		return err
	}
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
	p.host, p.log, p.cfg, p.mtu, p.ipam, p.st = req.Host, log, cfg, mtu, al, st
	// The userspace datapath forwards packets as it reads them: a checksum
	// left to "whoever transmits" arrives unfilled, unless ovs-vswitchd
	// takes such packets with their offload state (userspace TSO).
	p.noTxCsum = req.Node.DatapathType == "netdev" && !req.Node.UserspaceTSO
	p.gw = flows.Endpoint{OFPort: gwPort.OFPort, MAC: gwMAC, IPs: al.Gateways()}
	p.mu.Unlock()

	if err := p.resync(ctx); err != nil {
		return err
	}
	log.Info("podnet started", "pod_cidrs", al.CIDRs(), "gateway", cfg.Gateway, "gateway_ofport", gwPort.OFPort,
		"gateway_mac", gwMAC, "pods", len(st.list()))
	return req.Host.Synced(ctx)
}

// resync installs the static, gateway and all recorded pods' flows in one
// batch, and releases addresses no recorded pod holds (an ADD cut short by
// a crash).
func (p *Podnet) resync(ctx context.Context) error {
	b := flow.NewBatch().AddFlows(flows.StaticFlows()...).AddFlows(flows.GatewayFlows(p.gw)...)
	for _, r := range p.st.list() {
		port, err := p.host.Port(ctx, r.HostIfName)
		if err != nil {
			p.log.Warn("pod's OVS port is gone; its flows are not re-installed until it is deleted and added again",
				"pod", r.PodNamespace+"/"+r.PodName, "container", r.ContainerID, "port", r.HostIfName, "error", err)
			continue
		}
		if port.OFPort != r.OFPort {
			p.log.Info("pod port renumbered while podnet was down", "pod", r.PodNamespace+"/"+r.PodName, "old", r.OFPort, "new", port.OFPort)
			r.OFPort = port.OFPort
			if err := p.st.put(r); err != nil {
				return err
			}
		}
		b.AddFlows(flows.PodFlows(p.gw, endpoint(r))...)
	}
	if err := p.host.Apply(ctx, b); err != nil {
		return fmt.Errorf("installing podnet flows: %w", err)
	}
	allocs, err := p.ipam.Allocations()
	if err != nil {
		return err
	}
	for k := range allocs {
		if _, ok := p.st.get(k.ContainerID + "/" + k.IfName); !ok {
			p.log.Warn("releasing addresses of an attachment podnet has no record of", "container", k.ContainerID, "ifname", k.IfName, "ips", allocs[k])
			if err := p.ipam.Release(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stop closes the IPAM store. Interfaces and flows stay: pods keep working
// while the plugin restarts.
func (p *Podnet) Stop(ctx context.Context, _ sdk.StopRequest, _ *sdk.StopResponse) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ipam != nil {
		return p.ipam.Close()
	}
	return nil
}

func endpoint(r podRecord) flows.Endpoint {
	mac, _ := net.ParseMAC(r.MAC)
	return flows.Endpoint{OFPort: r.OFPort, MAC: mac, IPs: r.IPs}
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
	for _, r := range p.st.list() {
		b.DeleteFlows(flows.PodFlows(oldGW, endpoint(r))...).AddFlows(flows.PodFlows(newGW, endpoint(r))...)
	}
	if err := p.host.Apply(ctx, b); err != nil {
		al.Close()
		return fmt.Errorf("rewriting flows for pod CIDRs %v: %w", cidrs, err)
	}
	p.ipam, p.gw = al, newGW
	p.log.Info("pod CIDRs changed; gateway renumbered", "pod_cidrs", cidrs, "old_pod_cidrs", oldCIDRs,
		"gateway_ips", newGW.IPs, "old_gateway_ips", oldGW.IPs, "pods_kept", len(p.st.list()))
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

// podMTU picks the MTU: the network config's, else podnet's config or the
// node's.
func (p *Podnet) podMTU(conf []byte) int {
	if c, err := netconf.Parse(conf); err == nil && c.MTU != 0 {
		return c.MTU
	}
	return p.mtu
}

// CNIAdd wires a pod: addresses, veth, OVS port, flows, record. Each step
// is undone if a later one fails.
func (p *Podnet) CNIAdd(ctx context.Context, req sdk.CNIAddRequest, resp *sdk.CNIAddResponse) (err error) {
	p.ops.RLock()
	defer p.ops.RUnlock()
	a := req.Args
	key := ipam.Key{ContainerID: a.ContainerID, IfName: a.IfName}
	log := p.log.With("pod", a.PodNamespace+"/"+a.PodName, "container", a.ContainerID)
	if r, ok := p.st.get(a.ContainerID + "/" + a.IfName); ok {
		return &sdk.CNIError{Code: cnicode.AlreadyAttached, Msg: fmt.Sprintf("container %s already has %s attached (IPs %v)", a.ContainerID, a.IfName, r.IPs), Details: "CNI forbids a second ADD without a DEL in between"}
	}
	hostIf := HostIfName(a.ContainerID, a.IfName)
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
			log.Error("pod ADD failed and was rolled back", "error", err)
		}
	}()

	t0 := time.Now()
	var phases []any
	phase := func(name string) {
		now := time.Now()
		phases = append(phases, name, now.Sub(t0).Round(10*time.Microsecond).String())
		t0 = now
	}
	leases, err := p.ipam.Allocate(key)
	if err != nil {
		return err
	}
	undo = append(undo, func() {
		if e := p.ipam.Release(key); e != nil {
			log.Error("rollback: releasing addresses", "error", e)
		}
	})
	var ips []netip.Addr
	for _, l := range leases {
		ips = append(ips, l.Address.Addr())
	}
	mac := stableMAC(ips)
	mtu := p.podMTU(a.NetConf)
	vc := veth.Config{Netns: a.Netns, IfName: a.IfName, HostIfName: hostIf, MTU: mtu, MAC: mac, Addrs: ips, Gateways: p.gw.IPs,
		NoTxChecksum: p.noTxCsum}
	phase("ipam")
	if _, err := veth.Setup(vc); err != nil {
		return &sdk.CNIError{Code: cnicode.Interface, Msg: fmt.Sprintf("creating the pod interface: %v", err), Details: "check that the pod's network namespace is usable and no stale interface holds the name"}
	}
	phase("veth")
	undo = append(undo, func() {
		if e := veth.Teardown(a.Netns, a.IfName, hostIf); e != nil {
			log.Error("rollback: removing veth", "error", e)
		}
	})
	undo = append(undo, func() {
		// CreatePort may have written the port row before failing.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if e := p.host.DeletePort(ctx, hostIf); e != nil {
			log.Error("rollback: deleting OVS port", "port", hostIf, "error", e)
		}
	})
	port, err := p.host.CreatePort(ctx, sdk.PortRequest{Name: hostIf, ExternalIDs: map[string]string{
		"switchyard.dev/pod": a.PodNamespace + "/" + a.PodName, "switchyard.dev/container": a.ContainerID}})
	if err != nil {
		return &sdk.CNIError{Code: cnicode.Switch, Msg: fmt.Sprintf("creating OVS port %s: %v", hostIf, err), Details: "check that ovs-vswitchd is running on the node"}
	}
	phase("ovs_port")
	ep := flows.Endpoint{OFPort: port.OFPort, MAC: mac, IPs: ips}
	podFlows := flows.PodFlows(p.gw, ep)
	if err := p.host.Apply(ctx, flow.NewBatch().AddFlows(podFlows...)); err != nil {
		return &sdk.CNIError{Code: cnicode.Switch, Msg: fmt.Sprintf("installing flows for OVS port %s (ofport %d): %v", hostIf, port.OFPort, err), Details: "see the agent log for the refused flow"}
	}
	phase("flows")
	undo = append(undo, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if e := p.host.Apply(ctx, flow.NewBatch().DeleteTagged("", port.OFPort, ^uint32(0))); e != nil {
			log.Error("rollback: deleting flows", "error", e)
		}
	})
	rec := podRecord{ContainerID: a.ContainerID, IfName: a.IfName, HostIfName: hostIf, Netns: a.Netns,
		PodNamespace: a.PodNamespace, PodName: a.PodName, OFPort: port.OFPort, MAC: mac.String(), IPs: ips, MTU: mtu}
	if err := p.st.put(rec); err != nil {
		return err
	}
	phase("record")
	for _, ip := range ips {
		if ip.Is4() {
			if e := veth.GratuitousARP(a.Netns, a.IfName, mac, ip); e != nil {
				log.Warn("gratuitous ARP failed; neighbours learn the MAC on first contact instead", "error", e)
			}
		}
	}
	*resp = sdk.CNIAddResponse{MTU: mtu, Interface: sdk.PodInterface{
		PodNamespace: a.PodNamespace, PodName: a.PodName, ContainerID: a.ContainerID,
		IfName: a.IfName, HostIfName: hostIf, OFPort: port.OFPort, MAC: mac, IPs: ips,
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
	log.Info("pod attached", append([]any{"ips", ips, "mac", mac, "port", hostIf, "ofport", port.OFPort, "flows", len(podFlows)}, phases...)...)
	return nil
}

// CNIDel unwires a pod. It works from podnet's record when there is one
// and from derived names otherwise, and succeeds when nothing is left.
func (p *Podnet) CNIDel(ctx context.Context, req sdk.CNIDelRequest, _ *sdk.CNIDelResponse) error {
	p.ops.RLock()
	defer p.ops.RUnlock()
	a := req.Args
	key := ipam.Key{ContainerID: a.ContainerID, IfName: a.IfName}
	log := p.log.With("pod", a.PodNamespace+"/"+a.PodName, "container", a.ContainerID)
	rec, known := p.st.get(a.ContainerID + "/" + a.IfName)
	if !known {
		rec = podRecord{ContainerID: a.ContainerID, IfName: a.IfName, HostIfName: HostIfName(a.ContainerID, a.IfName), Netns: a.Netns}
		rec.IPs = p.ipam.Get(key)
		rec.MAC = stableMAC(rec.IPs).String()
	}
	netns := a.Netns
	if netns == "" {
		netns = rec.Netns
	}
	var errs []error
	port, perr := p.host.Port(ctx, rec.HostIfName)
	if perr == nil && rec.OFPort == 0 {
		rec.OFPort = port.OFPort
	}
	if rec.OFPort != 0 {
		// Every flow of the pod carries its ofport as the tag: delete them
		// by tag, whatever they were computed from when the pod was added.
		if err := p.host.Apply(ctx, flow.NewBatch().DeleteTagged("", rec.OFPort, ^uint32(0))); err != nil && !errors.Is(err, sdk.ErrNotFound) {
			errs = append(errs, fmt.Errorf("deleting flows: %w", err))
		}
	}
	if err := p.host.DeletePort(ctx, rec.HostIfName); err != nil && !errors.Is(err, sdk.ErrNotFound) {
		errs = append(errs, fmt.Errorf("deleting OVS port %s: %w", rec.HostIfName, err))
	}
	if err := veth.Teardown(netns, a.IfName, rec.HostIfName); err != nil {
		errs = append(errs, err)
	}
	if err := p.ipam.Release(key); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		log.Error("pod DEL incomplete; the runtime will retry", "error", err)
		return err
	}
	if known {
		if err := p.st.remove(rec.key()); err != nil {
			return err
		}
	}
	log.Info("pod detached", "port", rec.HostIfName, "ips", rec.IPs, "was_known", known)
	return nil
}

// CNICheck verifies the interface, addresses, routes, OVS port and IPAM
// allocation, and lists everything that is missing.
func (p *Podnet) CNICheck(ctx context.Context, req sdk.CNICheckRequest, _ *sdk.CNICheckResponse) error {
	p.ops.RLock()
	defer p.ops.RUnlock()
	a := req.Args
	rec, ok := p.st.get(a.ContainerID + "/" + a.IfName)
	if !ok {
		return &sdk.CNIError{Code: cnicode.CheckFailed, Msg: fmt.Sprintf("podnet has no record of %s in container %s", a.IfName, a.ContainerID), Details: "DEL and ADD the sandbox again"}
	}
	mac, _ := net.ParseMAC(rec.MAC)
	problems := veth.Check(veth.Config{Netns: a.Netns, IfName: a.IfName, HostIfName: rec.HostIfName, MTU: rec.MTU,
		MAC: mac, Addrs: rec.IPs, Gateways: p.gw.IPs})
	port, err := p.host.Port(ctx, rec.HostIfName)
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("OVS port %s is missing (%v)", rec.HostIfName, err))
	case port.OFPort != rec.OFPort:
		problems = append(problems, fmt.Sprintf("OVS port %s has ofport %d, its flows use %d", rec.HostIfName, port.OFPort, rec.OFPort))
	}
	held := p.ipam.Get(ipam.Key{ContainerID: a.ContainerID, IfName: a.IfName})
	for _, ip := range rec.IPs {
		found := false
		for _, h := range held {
			found = found || h == ip
		}
		if !found {
			problems = append(problems, fmt.Sprintf("IPAM no longer holds %s for this pod", ip))
		}
	}
	want := flows.PodFlows(p.gw, endpoint(rec))
	for _, f := range want {
		if err := f.Validate(); err != nil {
			problems = append(problems, fmt.Sprintf("flow %s is invalid: %v", f.String(), err))
		}
	}
	problems = append(problems, p.checkFlowsOnSwitch(ctx, rec.OFPort, want)...)
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
