package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/host/traceflow"
	"switchyard.dev/switchyard/sdk"
)

// TraceRequest is one packet to trace (POST /v1/trace). It starts either
// at a pod of this node (SourcePod) or, for the second half of a
// cross-node trace, on this node's tunnel port (FromTunnel, with the
// tunnel header the sending node set).
type TraceRequest struct {
	// SourcePod is "namespace/name" of a pod on this node.
	SourcePod string `json:"sourcePod,omitempty"`
	// FromTunnel starts the packet on this node's tunnel port.
	FromTunnel bool   `json:"fromTunnel,omitempty"`
	TunnelSrc  string `json:"tunnelSrc,omitempty"`
	TunnelDst  string `json:"tunnelDst,omitempty"`
	TunnelID   uint64 `json:"tunnelID,omitempty"`
	// Destination: DstIP, or DstPod ("namespace/name", a pod of this node).
	DstIP  string `json:"dstIP,omitempty"`
	DstPod string `json:"dstPod,omitempty"`
	// Protocol is tcp (default), udp, sctp or icmp.
	Protocol string `json:"protocol,omitempty"`
	SrcPort  uint16 `json:"srcPort,omitempty"`
	DstPort  uint16 `json:"dstPort,omitempty"`
	// Set by the sending node for a packet it tunnelled (and optional
	// otherwise: the source pod's addresses and the gateway MAC).
	SrcIP  string `json:"srcIP,omitempty"`
	SrcMAC string `json:"srcMAC,omitempty"`
	DstMAC string `json:"dstMAC,omitempty"`
	TTL    uint8  `json:"ttl,omitempty"`
	// Inject confirms the computed trace with a real, marked packet that
	// is stopped where the trace ends (inject.go).
	Inject bool `json:"inject,omitempty"`
}

// TraceHop is one flow the packet matched.
type TraceHop struct {
	TableID uint8  `json:"tableID"`
	Table   string `json:"table"`
	Stage   string `json:"stage,omitempty"`
	// TableOwner declared the table; Plugin wrote the flow that matched
	// (they differ when a plugin writes into another's exported table).
	TableOwner string `json:"tableOwner,omitempty"`
	Plugin     string `json:"plugin,omitempty"`
	Priority   uint16 `json:"priority"`
	Flow       string `json:"flow,omitempty"`
	// Description is the plugin's own account of the flow
	// (sdk.FlowDescriber), e.g. the policy and rule.
	Description string   `json:"description,omitempty"`
	Depth       int      `json:"depth,omitempty"`
	Notes       []string `json:"notes,omitempty"`
	// End is "drop" or "miss" on a hop where a path ended.
	End string `json:"end,omitempty"`
}

// Verdict kinds.
const (
	VerdictDelivered  = "delivered"  // to a pod of this node
	VerdictTunnel     = "tunnel"     // to the tunnel toward another node
	VerdictHost       = "host"       // to the node itself (gateway or LOCAL port)
	VerdictOutput     = "output"     // to another port
	VerdictDropped    = "dropped"    // a path ended without output
	VerdictController = "controller" // sent to the agent
)

// TraceVerdict is where the packet (or one copy of it) went.
type TraceVerdict struct {
	Kind string `json:"kind"`
	// Port is the OpenFlow port it left on.
	Port     string `json:"port,omitempty"`
	Pod      string `json:"pod,omitempty"`
	Node     string `json:"node,omitempty"`
	TunnelTo string `json:"tunnelTo,omitempty"`
	// Plugin, Table and Description say who decided a drop.
	Plugin      string `json:"plugin,omitempty"`
	Table       string `json:"table,omitempty"`
	Flow        string `json:"flow,omitempty"`
	Description string `json:"description,omitempty"`
	// Next, for a tunnel verdict, is the trace request for the receiving
	// node (its agent continues the trace there).
	Next *TraceRequest `json:"next,omitempty"`
}

// Outcome is the best thing that happened to a copy of the packet, in
// the order delivered, tunnel, host, output, controller, dropped; "lost"
// when no verdict says anything.
func Outcome(vs []TraceVerdict) string {
	for _, k := range []string{VerdictDelivered, VerdictTunnel, VerdictHost, VerdictOutput, VerdictController, VerdictDropped} {
		for _, v := range vs {
			if v.Kind == k {
				return k
			}
		}
	}
	return "lost"
}

// TraceResult is a trace on one node.
type TraceResult struct {
	Node     string         `json:"node"`
	Hops     []TraceHop     `json:"hops"`
	Verdicts []TraceVerdict `json:"verdicts"`
	// Truncated: the walk hit its step bound (a resubmit loop?).
	Truncated bool `json:"truncated,omitempty"`
	// Datapath is what the injected packet showed (with Inject).
	Datapath *DatapathCheck `json:"datapath,omitempty"`
	Millis   float64        `json:"millis"`
}

// errTrace marks a request the agent cannot trace (HTTP 400).
var errTrace = errors.New("trace")

// Trace follows req's packet through the flows br-int holds now (dumped
// over OpenFlow), naming at every hop the table, its owner and the plugin
// whose flow matched. No packet is sent (see host/traceflow).
func (a *Agent) Trace(ctx context.Context, req TraceRequest) (*TraceResult, error) {
	start := time.Now()
	facts := a.NodeFacts()
	stats, err := a.sw.DumpFlows(ctx, openflow.FlowStatsRequest{Table: openflow.TableAll})
	if err != nil {
		return nil, fmt.Errorf("%w: dumping br-int's flows: %v", sdk.ErrSwitch, err)
	}
	pl := &traceflow.Pipeline{Flows: map[uint8][]openflow.Flow{}, Groups: map[uint32]openflow.GroupDesc{}}
	for _, s := range stats {
		pl.Flows[s.Flow.Table] = append(pl.Flows[s.Flow.Table], s.Flow)
	}
	if gd, ok := a.sw.(interface {
		GroupDesc(context.Context, uint32) ([]openflow.GroupDesc, error)
	}); ok {
		if gs, err := gd.GroupDesc(ctx, openflow.GroupAll); err == nil {
			for _, g := range gs {
				pl.Groups[g.GroupID] = g
			}
		}
	}
	pkt, err := a.tracePacket(ctx, req, facts, pl)
	if err != nil {
		return nil, err
	}
	// The walk changes the packet as the flows do; the injection (if
	// asked) needs it as it starts.
	res := traceflow.Run(pl, pkt.Clone())

	a.mu.Lock()
	tables := map[uint8]pipeline.Table{}
	for _, t := range a.arb.Layout() {
		tables[t.ID] = t
	}
	owners := map[uint16]string{}
	for _, n := range a.arb.PluginNames() {
		if p, ok := a.arb.Plugin(n); ok {
			owners[p.Prefix] = n
		}
	}
	a.mu.Unlock()

	out := &TraceResult{Node: facts.Name, Truncated: res.Truncated}
	for _, h := range res.Hops {
		t := tables[h.Table]
		th := TraceHop{TableID: h.Table, Table: t.Name, TableOwner: t.Owner, Priority: h.Priority, Flow: h.Flow,
			Depth: h.Depth, Notes: h.Notes, End: h.End}
		if t.Name == "" {
			th.Table = fmt.Sprintf("table %d (not in the layout)", h.Table)
		} else {
			th.Stage = t.Pipeline.String() + "/" + t.Stage.String()
		}
		if h.Flow != "" {
			prefix, _, tag := pipeline.SplitCookie(h.Cookie)
			th.Plugin = owners[prefix]
			if th.Plugin == "" {
				th.Plugin = "host"
			}
			th.Description = a.describeFlow(ctx, th.Plugin, sdk.DescribeFlowRequest{Table: t.Name, Priority: h.Priority, Match: matchText(h.Flow), Tag: tag})
		}
		out.Hops = append(out.Hops, th)
	}
	out.Verdicts, err = a.verdicts(ctx, res, out.Hops, facts)
	if err != nil {
		return nil, err
	}
	if req.Inject {
		out.Datapath = a.inject(ctx, res, pkt, out.Hops)
	}
	out.Millis = float64(time.Since(start).Microseconds()) / 1000
	return out, nil
}

// matchText is the match part of a flow's canonical text.
func matchText(flow string) string {
	m, _, _ := strings.Cut(flow, " actions=")
	parts := strings.Split(m, ",")
	var keep []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if strings.HasPrefix(p, "cookie=") || strings.HasPrefix(p, "table=") || strings.HasPrefix(p, "priority=") || p == "" {
			continue
		}
		keep = append(keep, p)
	}
	return strings.Join(keep, ",")
}

// describeFlow asks the flow's plugin what it means, if it can say.
func (a *Agent) describeFlow(ctx context.Context, plugin string, req sdk.DescribeFlowRequest) string {
	if !slices.Contains(a.pluginCaps(plugin), sdk.CapDescribeFlows) {
		return ""
	}
	proc := a.liveProc(plugin)
	if proc == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	d, err := proc.DescribeFlow(ctx, req)
	if err != nil {
		a.log.Warn("plugin could not describe its flow for a trace", "plugin", plugin, "table", req.Table, "error", err)
		return ""
	}
	return d
}

func (a *Agent) pluginCaps(name string) []sdk.Capability {
	a.pmu.Lock()
	r := a.plugins[name]
	a.pmu.Unlock()
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.caps)
}

// tracePacket builds the packet the request describes.
func (a *Agent) tracePacket(ctx context.Context, req TraceRequest, facts sdk.NodeFacts, pl *traceflow.Pipeline) (*traceflow.Packet, error) {
	pods := a.knownPods()
	pkt := traceflow.NewPacket()
	var src netip.Addr
	var srcMAC, gwMAC net.HardwareAddr
	switch {
	case req.SourcePod != "" && req.FromTunnel:
		return nil, fmt.Errorf("%w: give sourcePod or fromTunnel, not both", errTrace)
	case req.SourcePod != "":
		p, ok := findPod(pods, req.SourcePod)
		if !ok {
			return nil, fmt.Errorf("%w: pod %q has no interface on node %s (is it on another node? run the trace there)", errTrace, req.SourcePod, facts.Name)
		}
		pkt.Set(openflow.FieldInPort, uint64(p.OFPort))
		srcMAC = p.MAC
		if len(p.IPs) > 0 {
			src = p.IPs[0]
		}
		gwMAC = gatewayMAC(pl, p, facts)
	case req.FromTunnel:
		port, err := a.tunnelPort(ctx)
		if err != nil {
			return nil, err
		}
		pkt.Set(openflow.FieldInPort, uint64(port.OFPort))
		for _, x := range []struct {
			f openflow.Field
			s string
		}{{openflow.FieldTunIPv4Src, req.TunnelSrc}, {openflow.FieldTunIPv4Dst, req.TunnelDst}} {
			ip, err := netip.ParseAddr(x.s)
			if err != nil || !ip.Is4() {
				return nil, fmt.Errorf("%w: tunnel addresses must be IPv4 (got %q)", errTrace, x.s)
			}
			b := ip.As4()
			pkt.SetBytes(x.f, b[:])
		}
		pkt.Set(openflow.FieldTunID, req.TunnelID)
	default:
		return nil, fmt.Errorf("%w: say where the packet starts: sourcePod (namespace/name of a pod on node %s)", errTrace, facts.Name)
	}
	if req.SrcIP != "" {
		ip, err := netip.ParseAddr(req.SrcIP)
		if err != nil {
			return nil, fmt.Errorf("%w: srcIP %q: %v", errTrace, req.SrcIP, err)
		}
		src = ip
	}
	var dst netip.Addr
	switch {
	case req.DstPod != "":
		p, ok := findPod(pods, req.DstPod)
		if !ok || len(p.IPs) == 0 {
			return nil, fmt.Errorf("%w: destination pod %q is not on node %s; give its IP (dstIP) instead", errTrace, req.DstPod, facts.Name)
		}
		dst = p.IPs[0]
	case req.DstIP != "":
		ip, err := netip.ParseAddr(req.DstIP)
		if err != nil {
			return nil, fmt.Errorf("%w: dstIP %q: %v", errTrace, req.DstIP, err)
		}
		dst = ip
	default:
		return nil, fmt.Errorf("%w: say where the packet goes: dstIP or dstPod", errTrace)
	}
	if !src.IsValid() || src.Is4() != dst.Is4() {
		return nil, fmt.Errorf("%w: no source address of the destination's family (%s); give srcIP", errTrace, dst)
	}
	if srcMAC == nil && req.SrcMAC == "" && !req.FromTunnel {
		return nil, fmt.Errorf("%w: no source MAC; give srcMAC", errTrace)
	}
	for _, m := range []struct {
		f   openflow.Field
		s   string
		def net.HardwareAddr
	}{{openflow.FieldEthSrc, req.SrcMAC, srcMAC}, {openflow.FieldEthDst, req.DstMAC, gwMAC}} {
		mac := m.def
		if m.s != "" {
			var err error
			if mac, err = net.ParseMAC(m.s); err != nil {
				return nil, fmt.Errorf("%w: MAC %q: %v", errTrace, m.s, err)
			}
		}
		if len(mac) == 6 {
			pkt.SetBytes(m.f, mac)
		}
	}
	ttl := uint64(64)
	if req.TTL != 0 {
		ttl = uint64(req.TTL)
	}
	pkt.Set(openflow.FieldIPTTL, ttl)
	if dst.Is4() {
		pkt.Set(openflow.FieldEthType, 0x0800)
		s4, d4 := src.As4(), dst.As4()
		pkt.SetBytes(openflow.FieldIPv4Src, s4[:])
		pkt.SetBytes(openflow.FieldIPv4Dst, d4[:])
	} else {
		pkt.Set(openflow.FieldEthType, 0x86dd)
		s6, d6 := src.As16(), dst.As16()
		pkt.SetBytes(openflow.FieldIPv6Src, s6[:])
		pkt.SetBytes(openflow.FieldIPv6Dst, d6[:])
	}
	srcPort := uint64(req.SrcPort)
	if srcPort == 0 {
		srcPort = 40000
	}
	switch strings.ToLower(req.Protocol) {
	case "", "tcp":
		pkt.Set(openflow.FieldIPProto, 6)
		pkt.Set(openflow.FieldTCPSrc, srcPort)
		pkt.Set(openflow.FieldTCPDst, uint64(req.DstPort))
		pkt.Set(openflow.FieldTCPFlags, 0x002) // SYN: a connection's first packet
	case "udp":
		pkt.Set(openflow.FieldIPProto, 17)
		pkt.Set(openflow.FieldUDPSrc, srcPort)
		pkt.Set(openflow.FieldUDPDst, uint64(req.DstPort))
	case "sctp":
		pkt.Set(openflow.FieldIPProto, 132)
		pkt.Set(openflow.FieldSCTPSrc, srcPort)
		pkt.Set(openflow.FieldSCTPDst, uint64(req.DstPort))
	case "icmp":
		if dst.Is4() {
			pkt.Set(openflow.FieldIPProto, 1)
			pkt.Set(openflow.FieldICMPv4Type, 8)
		} else {
			pkt.Set(openflow.FieldIPProto, 58)
			pkt.Set(openflow.FieldICMPv6Type, 128)
		}
	default:
		return nil, fmt.Errorf("%w: protocol %q: use tcp, udp, sctp or icmp", errTrace, req.Protocol)
	}
	if (req.Protocol == "" || strings.EqualFold(req.Protocol, "tcp") || strings.EqualFold(req.Protocol, "udp") || strings.EqualFold(req.Protocol, "sctp")) && req.DstPort == 0 {
		return nil, fmt.Errorf("%w: give the destination port (dstPort) for %s", errTrace, strings.ToLower(cmpOr(req.Protocol, "tcp")))
	}
	return pkt, nil
}

// gatewayMAC is the MAC a pod sends off-link traffic to (its only
// route is via the gateway): the node's gateway MAC from the facts, else
// what the pipeline answers when the pod asks for its gateway (an ARP
// request traced like any packet; the answer's sender MAC). Nil if
// neither says.
func gatewayMAC(pl *traceflow.Pipeline, pod sdk.PodInterface, facts sdk.NodeFacts) net.HardwareAddr {
	if len(facts.GatewayMAC) == 6 {
		return facts.GatewayMAC
	}
	if len(pod.IPs) == 0 || !pod.IPs[0].Is4() || len(pod.MAC) != 6 {
		return nil
	}
	gw := facts.GatewayIP
	if !gw.IsValid() {
		for _, c := range facts.PodCIDRs {
			if c.Addr().Is4() {
				gw = c.Masked().Addr().Next() // the host's convention: the first address
			}
		}
	}
	if !gw.Is4() {
		return nil
	}
	arp := traceflow.NewPacket()
	arp.Set(openflow.FieldInPort, uint64(pod.OFPort))
	arp.Set(openflow.FieldEthType, 0x0806)
	arp.SetBytes(openflow.FieldEthSrc, pod.MAC)
	arp.SetBytes(openflow.FieldEthDst, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	arp.Set(openflow.FieldARPOp, 1)
	spa, tpa := pod.IPs[0].As4(), gw.As4()
	arp.SetBytes(openflow.FieldARPSPA, spa[:])
	arp.SetBytes(openflow.FieldARPTPA, tpa[:])
	arp.SetBytes(openflow.FieldARPSHA, pod.MAC)
	for _, o := range traceflow.Run(pl, arp).Outputs {
		if o.Packet.Uint(openflow.FieldARPOp) == 2 {
			return net.HardwareAddr(o.Packet.Get(openflow.FieldARPSHA))
		}
	}
	return nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (a *Agent) knownPods() []sdk.PodInterface {
	a.known.Lock()
	defer a.known.Unlock()
	out := make([]sdk.PodInterface, 0, len(a.known.pods))
	for _, p := range a.known.pods {
		out = append(out, p)
	}
	return out
}

func findPod(pods []sdk.PodInterface, name string) (sdk.PodInterface, bool) {
	ns, n, ok := strings.Cut(name, "/")
	if !ok {
		ns, n = "default", name
	}
	for _, p := range pods {
		if p.PodNamespace == ns && p.PodName == n {
			return p, true
		}
	}
	return sdk.PodInterface{}, false
}

// tunnelPort is this node's (first) tunnel port.
func (a *Agent) tunnelPort(ctx context.Context) (portInfo, error) {
	ports, err := a.db.Ports(ctx, "")
	if err != nil {
		return portInfo{}, fmt.Errorf("%w: listing ports: %v", sdk.ErrSwitch, err)
	}
	for _, p := range ports {
		if isTunnel(p.Type) && p.OFPort > 0 {
			return portInfo{Name: p.Name, OFPort: uint32(p.OFPort), Type: p.Type}, nil
		}
	}
	return portInfo{}, fmt.Errorf("%w: node %s has no tunnel port (is the tunnel plugin enabled?)", errTrace, a.NodeFacts().Name)
}

type portInfo struct {
	Name   string
	OFPort uint32
	Type   string
}

func isTunnel(typ string) bool {
	return typ == "geneve" || typ == "vxlan" || typ == "gre" || typ == "stt"
}

// verdicts says where each copy of the packet went.
func (a *Agent) verdicts(ctx context.Context, res *traceflow.Result, hops []TraceHop, facts sdk.NodeFacts) ([]TraceVerdict, error) {
	var out []TraceVerdict
	ports := map[uint32]portInfo{}
	if ps, err := a.db.Ports(ctx, ""); err == nil {
		for _, p := range ps {
			if p.OFPort > 0 {
				ports[uint32(p.OFPort)] = portInfo{Name: p.Name, OFPort: uint32(p.OFPort), Type: p.Type}
			}
		}
	}
	pods := map[uint32]sdk.PodInterface{}
	for _, p := range a.knownPods() {
		pods[p.OFPort] = p
	}
	for _, o := range res.Outputs {
		v := TraceVerdict{Port: ports[o.Port].Name}
		if v.Port == "" {
			v.Port = fmt.Sprint(o.Port)
		}
		switch p, isPod := pods[o.Port]; {
		case isPod:
			v.Kind, v.Pod = VerdictDelivered, p.PodNamespace+"/"+p.PodName
		case isTunnel(ports[o.Port].Type):
			v.Kind = VerdictTunnel
			tun := netip.AddrFrom4([4]byte(o.Packet.Get(openflow.FieldTunIPv4Dst)))
			v.TunnelTo = tun.String()
			v.Node = a.nodeByIP(tun)
			v.Next = nextRequest(o.Packet, facts, tun)
		case o.Port == openflow.PortLocal || ports[o.Port].Type == "internal":
			v.Kind = VerdictHost
		default:
			v.Kind = VerdictOutput
		}
		out = append(out, v)
	}
	for _, i := range res.Controller {
		out = append(out, TraceVerdict{Kind: VerdictController, Plugin: hops[i].Plugin, Table: hops[i].Table, Flow: hops[i].Flow, Description: hops[i].Description})
	}
	for _, i := range res.Drops {
		h := hops[i]
		v := TraceVerdict{Kind: VerdictDropped, Plugin: h.Plugin, Table: h.Table, Flow: h.Flow, Description: h.Description}
		if h.End == "miss" {
			v.Plugin = h.TableOwner
			v.Description = "no flow matched (table miss)"
		}
		out = append(out, v)
	}
	return out, nil
}

// nodeByIP names the node holding ip ("" if unknown).
func (a *Agent) nodeByIP(ip netip.Addr) string {
	a.known.Lock()
	defer a.known.Unlock()
	for _, n := range a.known.nodes {
		if slices.Contains(n.NodeIPs, ip) {
			return n.Name
		}
	}
	return ""
}

// nextRequest is the trace request for the node receiving a tunnelled
// packet: the inner packet as it left, on that node's tunnel port.
func nextRequest(p *traceflow.Packet, facts sdk.NodeFacts, tunDst netip.Addr) *TraceRequest {
	r := &TraceRequest{FromTunnel: true, TunnelDst: tunDst.String(), TunnelID: p.Uint(openflow.FieldTunID),
		SrcMAC: net.HardwareAddr(p.Get(openflow.FieldEthSrc)).String(), DstMAC: net.HardwareAddr(p.Get(openflow.FieldEthDst)).String(),
		TTL: uint8(p.Uint(openflow.FieldIPTTL))}
	for _, ip := range facts.NodeIPs {
		if ip.Is4() {
			r.TunnelSrc = ip.String()
			break
		}
	}
	if src := p.Uint(openflow.FieldTunIPv4Src); src != 0 {
		r.TunnelSrc = netip.AddrFrom4([4]byte(p.Get(openflow.FieldTunIPv4Src))).String()
	}
	switch p.Uint(openflow.FieldEthType) {
	case 0x0800:
		r.SrcIP = netip.AddrFrom4([4]byte(p.Get(openflow.FieldIPv4Src))).String()
		r.DstIP = netip.AddrFrom4([4]byte(p.Get(openflow.FieldIPv4Dst))).String()
	case 0x86dd:
		r.SrcIP = netip.AddrFrom16([16]byte(p.Get(openflow.FieldIPv6Src))).String()
		r.DstIP = netip.AddrFrom16([16]byte(p.Get(openflow.FieldIPv6Dst))).String()
	}
	switch p.Uint(openflow.FieldIPProto) {
	case 6:
		r.Protocol, r.SrcPort, r.DstPort = "tcp", uint16(p.Uint(openflow.FieldTCPSrc)), uint16(p.Uint(openflow.FieldTCPDst))
	case 17:
		r.Protocol, r.SrcPort, r.DstPort = "udp", uint16(p.Uint(openflow.FieldUDPSrc)), uint16(p.Uint(openflow.FieldUDPDst))
	case 132:
		r.Protocol, r.SrcPort, r.DstPort = "sctp", uint16(p.Uint(openflow.FieldSCTPSrc)), uint16(p.Uint(openflow.FieldSCTPDst))
	default:
		r.Protocol = "icmp"
	}
	return r
}
