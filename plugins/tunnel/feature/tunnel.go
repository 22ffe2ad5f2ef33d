package feature

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"switchyard.dev/switchyard/plugins/tunnel/flows"
	"switchyard.dev/switchyard/plugins/tunnel/hostnet"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Version of the plugin, reported in Describe.
const Version = "0.1.0"

// Defaults.
const (
	DefaultType     = "geneve"
	DefaultPort     = "sy-tun0"
	DefaultGateway  = "sy-gw0"
	DefaultStateDir = "/var/lib/switchyard/tunnel"
)

// Encapsulation overheads on the wire over an IPv4 underlay: outer
// Ethernet 14 + IPv4 20 + UDP 8 + the tunnel header 8 (Geneve without
// options, VXLAN). An IPv6 underlay adds 20.
const (
	overheadGeneve = 50
	overheadVXLAN  = 50
	overheadIPv6   = 20
)

// Config is tunnel's section of the agent config.
type Config struct {
	// Type is the encapsulation: geneve (default) or vxlan.
	Type string `json:"type,omitempty"`
	// Port is the name of the tunnel port on br-int.
	Port string `json:"port,omitempty"`
	// Gateway is podnet's gateway device, which routes to peer pods use.
	Gateway string `json:"gateway,omitempty"`
	// StateDir holds the record of installed peers.
	StateDir string `json:"stateDir,omitempty"`
	// Masquerade pod traffic that leaves the cluster (default true).
	Masquerade *bool `json:"masquerade,omitempty"`
	// IPv6Underlay: the nodes talk over IPv6, so the overhead is 20 more.
	IPv6Underlay bool `json:"ipv6Underlay,omitempty"`
}

// ParseConfig reads and checks the config section; an error names the key.
func ParseConfig(b []byte) (Config, error) {
	c := Config{}
	if len(b) > 0 && string(b) != "null" {
		if err := json.Unmarshal(b, &c); err != nil {
			return c, fmt.Errorf("tunnel config: %w", err)
		}
	}
	if c.Type == "" {
		c.Type = DefaultType
	}
	if c.Port == "" {
		c.Port = DefaultPort
	}
	if c.Gateway == "" {
		c.Gateway = DefaultGateway
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.Type != "geneve" && c.Type != "vxlan" {
		return c, fmt.Errorf("tunnel config type: %q is not an encapsulation this plugin knows; use geneve or vxlan", c.Type)
	}
	if len(c.Port) > 15 {
		return c, fmt.Errorf("tunnel config port: %q is longer than 15 characters (a Linux interface name)", c.Port)
	}
	return c, nil
}

// Overhead is the encapsulation overhead c declares.
func (c Config) Overhead() int {
	o := overheadGeneve
	if c.Type == "vxlan" {
		o = overheadVXLAN
	}
	if c.IPv6Underlay {
		o += overheadIPv6
	}
	return o
}

func (c Config) masquerade() bool { return c.Masquerade == nil || *c.Masquerade }

// Tunnel implements the plugin.
type Tunnel struct {
	// mu serialises node events, facts changes and the prune; it is held
	// across host calls, so each change is applied whole before the next.
	mu    sync.Mutex
	host  sdk.Host
	log   *slog.Logger
	cfg   Config
	facts sdk.NodeFacts
	local flows.Local
	gw    netlink.Link
	// peers are the installed peers, by name; seen are those a node event
	// of this incarnation confirmed.
	peers    map[string]flows.Peer
	seen     map[string]bool
	stop     chan struct{}
	stopOnce sync.Once
}

var (
	_ sdk.Feature             = (*Tunnel)(nil)
	_ sdk.NodeEventSubscriber = (*Tunnel)(nil)
	_ sdk.NodeFactsSubscriber = (*Tunnel)(nil)
	_ sdk.Stopper             = (*Tunnel)(nil)
)

// New returns an unstarted tunnel plugin.
func New() *Tunnel { return &Tunnel{log: slog.Default(), stop: make(chan struct{})} }

// Describe declares the table and the encapsulation overhead.
func (t *Tunnel) Describe(_ context.Context, req sdk.DescribeRequest, resp *sdk.DescribeResponse) error {
	cfg, err := ParseConfig(req.Config)
	if err != nil {
		return err
	}
	resp.Name = "tunnel"
	resp.Version = Version
	resp.Tables = flows.Tables()
	resp.EncapOverhead = cfg.Overhead()
	return nil
}

// pruneAfter is how long a restarted incarnation keeps a recorded peer that
// no node event confirmed: the host replays every known node right after
// Start, so a peer still unconfirmed by then was deleted while the plugin
// was down.
const pruneAfter = 10 * time.Second

// Start creates the tunnel port, re-installs the recorded peers, and says
// Synced.
func (t *Tunnel) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	cfg, err := ParseConfig(req.Config)
	if err != nil {
		return err
	}
	log := req.Host.Logger()
	if err := hostnet.EnableForwarding(); err != nil {
		return err
	}
	// Exported: other features (egress, service) may send into the tunnel
	// too, with tun_dst set.
	port, err := req.Host.CreatePort(ctx, sdk.PortRequest{Name: cfg.Port, Type: cfg.Type, Exported: true,
		Options:     map[string]string{"remote_ip": "flow", "key": "flow"},
		ExternalIDs: map[string]string{"switchyard.dev/role": "tunnel"}})
	if err != nil {
		return fmt.Errorf("creating the %s tunnel port %s: %w", cfg.Type, cfg.Port, err)
	}
	gw, err := hostnet.Gateway(cfg.Gateway, 10*time.Second)
	if err != nil {
		return err
	}
	local := localOf(port.OFPort, req.Node, gw)
	if len(local.GatewayMAC) != 6 {
		return fmt.Errorf("gateway %s has no MAC address yet; is podnet running?", cfg.Gateway)
	}
	recorded, err := loadPeers(statePath(cfg))
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.host, t.log, t.cfg, t.facts, t.local, t.gw = req.Host, log, cfg, req.Node, local, gw
	t.peers, t.seen = map[string]flows.Peer{}, map[string]bool{}
	b := flow.NewBatch().AddFlows(flows.StaticFlows(local)...)
	for _, p := range recorded {
		b.AddFlows(flows.PeerFlows(local, p)...)
	}
	if err := t.host.Apply(ctx, b); err != nil {
		return fmt.Errorf("installing tunnel flows: %w", err)
	}
	for _, p := range recorded {
		t.peers[p.Name] = p
		if err := t.addRoutes(p); err != nil {
			return err
		}
	}
	if err := t.applyMasq(); err != nil {
		return err
	}
	log.Info("tunnel started", "type", cfg.Type, "port", cfg.Port, "ofport", port.OFPort, "gateway", cfg.Gateway,
		"gateway_mac", local.GatewayMAC, "overhead", cfg.Overhead(), "pod_mtu", req.Node.PodMTU, "recorded_peers", len(recorded))
	if len(recorded) > 0 {
		go t.pruneUnseen(pruneAfter)
	}
	return t.host.Synced(ctx)
}

// localOf is this node as the flows need it.
func localOf(ofport uint32, n sdk.NodeFacts, gw netlink.Link) flows.Local {
	l := flows.Local{TunnelPort: ofport, GatewayMAC: n.GatewayMAC}
	if len(l.GatewayMAC) != 6 {
		l.GatewayMAC = gw.Attrs().HardwareAddr
	}
	for _, c := range n.PodCIDRs {
		if c.Addr().Is4() {
			l.GatewayIPv4 = flows.GatewayIP(c)
		}
	}
	return l
}

// Stop leaves flows, routes and masquerade in place when the plugin is
// only restarted (or the agent is): a next incarnation takes them over,
// and traffic keeps flowing meanwhile. When the plugin is unloaded for good
// it removes what it made outside the switch (the host removes its flows
// and port): the routes to peer pod CIDRs, the masquerade table and its
// state file.
func (t *Tunnel) Stop(_ context.Context, req sdk.StopRequest, _ *sdk.StopResponse) error {
	t.stopOnce.Do(func() { close(t.stop) })
	if !req.Unload {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	if t.gw != nil {
		for _, n := range slices.Sorted(maps.Keys(t.peers)) {
			for _, r := range routesOf(t.peers[n]) {
				errs = append(errs, hostnet.DelRoute(t.gw, r))
			}
		}
	}
	errs = append(errs, hostnet.Remove())
	if t.cfg.StateDir != "" {
		if err := os.Remove(statePath(t.cfg)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	t.log.Info("unloaded: removed routes to peer pod CIDRs, masquerade and state", "peers", len(t.peers))
	return errors.Join(errs...)
}

// peerOf turns a node event into a peer; ok is false for a node that
// cannot be reached yet (no IPv4 address or no pod CIDR).
func peerOf(n sdk.NodeInfo) (flows.Peer, bool) {
	p := flows.Peer{Name: n.Name}
	for _, ip := range n.NodeIPs {
		p.NodeIPs = append(p.NodeIPs, ip.Unmap())
		if !p.IP.IsValid() && (ip.Is4() || ip.Is4In6()) {
			p.IP = ip.Unmap()
		}
	}
	for _, c := range n.PodCIDRs {
		p.PodCIDRs = append(p.PodCIDRs, c.Masked())
	}
	return p, p.IP.IsValid() && len(p.PodCIDRs) > 0
}

// NodeEvent installs, updates or removes one peer: only the flows, routes
// and rules that differ change, each flow change in one batch.
func (t *Tunnel) NodeEvent(ctx context.Context, req sdk.NodeEventRequest, _ *sdk.NodeEventResponse) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if req.Node.Name == t.facts.Name {
		return nil
	}
	old, had := t.peers[req.Node.Name]
	p, ok := peerOf(req.Node)
	if req.Kind == sdk.NodeDeleted || !ok {
		if !had {
			return nil
		}
		return t.removePeer(ctx, old)
	}
	t.seen[p.Name] = true
	if had && samePeer(old, p) {
		return nil
	}
	var oldFlows []flow.Flow
	if had {
		oldFlows = flows.PeerFlows(t.local, old)
	}
	b := diff(oldFlows, flows.PeerFlows(t.local, p))
	if b.Len() > 0 {
		if err := t.host.Apply(ctx, b); err != nil {
			return fmt.Errorf("peer %s: %w", p.Name, err)
		}
	}
	if had {
		for _, r := range routesOf(old) {
			if !slices.Contains(routesOf(p), r) {
				if err := hostnet.DelRoute(t.gw, r); err != nil {
					t.log.Warn("could not remove an old route of a peer", "node", p.Name, "route", r.Dst, "error", err)
				}
			}
		}
	}
	t.peers[p.Name] = p
	if err := t.addRoutes(p); err != nil {
		return err
	}
	if err := t.applyMasq(); err != nil {
		return err
	}
	t.log.Info("peer node installed", "node", p.Name, "node_ip", p.IP, "pod_cidrs", p.PodCIDRs, "updated", had, "flow_changes", b.Len())
	return t.save()
}

// removePeer deletes every flow of the peer in one batch, then its routes.
func (t *Tunnel) removePeer(ctx context.Context, p flows.Peer) error {
	b := flow.NewBatch().DeleteFlows(flows.PeerFlows(t.local, p)...)
	if err := t.host.Apply(ctx, b); err != nil {
		return fmt.Errorf("removing peer %s: %w", p.Name, err)
	}
	delete(t.peers, p.Name)
	var errs []error
	for _, r := range routesOf(p) {
		errs = append(errs, hostnet.DelRoute(t.gw, r))
	}
	errs = append(errs, t.applyMasq(), t.save())
	t.log.Info("peer node removed", "node", p.Name, "node_ip", p.IP, "pod_cidrs", p.PodCIDRs, "flows_deleted", b.Len())
	return errors.Join(errs...)
}

// NodeFactsChanged re-derives the local side (gateway MAC, local gateway
// IP, masquerade sources) and re-installs every flow that depends on it.
func (t *Tunnel) NodeFactsChanged(ctx context.Context, req sdk.NodeFactsChangedRequest, _ *sdk.NodeFactsChangedResponse) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.local
	t.facts = req.New
	t.local = localOf(old.TunnelPort, req.New, t.gw)
	if t.local.GatewayMAC.String() != old.GatewayMAC.String() || t.local.GatewayIPv4 != old.GatewayIPv4 {
		var before, after []flow.Flow
		before = append(before, flows.StaticFlows(old)...)
		after = append(after, flows.StaticFlows(t.local)...)
		for _, n := range slices.Sorted(maps.Keys(t.peers)) {
			before = append(before, flows.PeerFlows(old, t.peers[n])...)
			after = append(after, flows.PeerFlows(t.local, t.peers[n])...)
		}
		if b := diff(before, after); b.Len() > 0 {
			if err := t.host.Apply(ctx, b); err != nil {
				return err
			}
		}
	}
	return t.applyMasq()
}

// pruneUnseen removes, after d, recorded peers that no node event of this
// incarnation confirmed.
func (t *Tunnel) pruneUnseen(d time.Duration) {
	select {
	case <-t.stop:
		return
	case <-time.After(d):
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range slices.Sorted(maps.Keys(t.peers)) {
		if t.seen[n] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := t.removePeer(ctx, t.peers[n]); err != nil {
			t.log.Warn("could not remove a peer deleted while the plugin was down", "node", n, "error", err)
		}
		cancel()
	}
}

func (t *Tunnel) addRoutes(p flows.Peer) error {
	if t.facts.Uplink != "" {
		if err := hostnet.Resolve(t.facts.Uplink, p.IP); err != nil {
			t.log.Warn("could not resolve a peer's underlay address ahead of traffic; its first packet may be lost", "node", p.Name, "node_ip", p.IP, "error", err)
		}
	}
	for _, r := range routesOf(p) {
		if err := hostnet.AddRoute(t.gw, r, flows.RemoteMAC); err != nil {
			return fmt.Errorf("peer %s: %w", p.Name, err)
		}
	}
	return nil
}

func (t *Tunnel) applyMasq() error {
	if !t.cfg.masquerade() {
		// Turned off in the config: drop what an earlier incarnation made.
		return hostnet.Remove()
	}
	return hostnet.Apply(masqOf(t.facts, t.cfg.Gateway, t.peers))
}

// masqOf is the masquerade of this node's pods: everything but traffic to
// the cluster's pods and to any node address, of either family.
func masqOf(facts sdk.NodeFacts, gateway string, peers map[string]flows.Peer) hostnet.Masq {
	m := hostnet.Masq{PodCIDRs: facts.PodCIDRs, Gateway: gateway}
	m.Keep = append(m.Keep, facts.PodCIDRs...)
	keepIP := func(ip netip.Addr) { m.Keep = append(m.Keep, netip.PrefixFrom(ip, ip.BitLen())) }
	for _, ip := range facts.NodeIPs {
		keepIP(ip)
	}
	for _, n := range slices.Sorted(maps.Keys(peers)) {
		p := peers[n]
		m.Keep = append(m.Keep, p.PodCIDRs...)
		keepIP(p.IP)
		for _, ip := range p.NodeIPs {
			if ip != p.IP {
				keepIP(ip)
			}
		}
	}
	return m
}

func routesOf(p flows.Peer) []hostnet.Route {
	var rs []hostnet.Route
	for _, c := range p.PodCIDRs {
		rs = append(rs, hostnet.Route{Dst: c, Via: flows.GatewayIP(c)})
	}
	return rs
}

func samePeer(a, b flows.Peer) bool {
	return a.Name == b.Name && a.IP == b.IP && slices.Equal(a.PodCIDRs, b.PodCIDRs) && slices.Equal(a.NodeIPs, b.NodeIPs)
}

// diff is the batch that turns the flows before into the flows after:
// deletes for keys that went, modifications for keys whose actions
// changed, adds for new keys.
func diff(before, after []flow.Flow) *flow.Batch {
	b := flow.NewBatch()
	was := map[flow.Key]flow.Flow{}
	for _, f := range before {
		was[f.Key()] = f
	}
	is := map[flow.Key]bool{}
	for _, f := range after {
		is[f.Key()] = true
		old, ok := was[f.Key()]
		switch {
		case !ok:
			b.AddFlows(f)
		case old.String() != f.String() || old.Tag != f.Tag:
			b.ModifyFlows(f)
		}
	}
	for _, f := range before {
		if !is[f.Key()] {
			b.DeleteFlows(f)
		}
	}
	return b
}

func statePath(c Config) string { return filepath.Join(c.StateDir, "peers.json") }

// peerRecord is a peer as the state file keeps it.
type peerRecord struct {
	Name     string         `json:"name"`
	IP       netip.Addr     `json:"ip"`
	PodCIDRs []netip.Prefix `json:"podCIDRs"`
	NodeIPs  []netip.Addr   `json:"nodeIPs,omitempty"`
}

func loadPeers(path string) ([]flows.Peer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rs []peerRecord
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("tunnel state %s is corrupt (%v); delete it and restart the plugin, the node events rebuild it", path, err)
	}
	var out []flows.Peer
	for _, r := range rs {
		out = append(out, flows.Peer{Name: r.Name, IP: r.IP, PodCIDRs: r.PodCIDRs, NodeIPs: r.NodeIPs})
	}
	return out, nil
}

// save writes the installed peers atomically (temp file and rename).
func (t *Tunnel) save() error {
	var rs []peerRecord
	for _, n := range slices.Sorted(maps.Keys(t.peers)) {
		p := t.peers[n]
		rs = append(rs, peerRecord{Name: p.Name, IP: p.IP, PodCIDRs: p.PodCIDRs, NodeIPs: p.NodeIPs})
	}
	b, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	path := statePath(t.cfg)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
