package flows

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"slices"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Table names. They are global on the node, hence the prefix.
const (
	UnSNAT    = "service.unsnat"
	Conntrack = "service.conntrack"
	CTMark    = "service.ct_mark"
	LB        = "service.lb"
	Affinity  = "service.affinity"
	Select    = "service.select"
	DNAT      = "service.dnat"
	L4        = "service.l4"
	Inject    = "service.inject"
	SNAT      = "service.snat"
	Output    = "service.output"
)

// Tables declares the service plugin's tables. None is exported: nobody
// else needs to write into them.
func Tables() []sdk.Table {
	ip := flow.PipelineIP
	return []sdk.Table{
		// After netpol's conntrack lookup, which must see replies as the
		// pods sent them (plugins/netpol/flows); a node without netpol
		// leaves the two IDs it keeps for it free.
		{Name: UnSNAT, Pipeline: ip, Stage: flow.StageConntrackState, Miss: sdk.MissNext, After: []string{"netpol.ct_state", "netpol.ct_flags"}},
		{Name: Conntrack, Pipeline: ip, Stage: flow.StageConntrackState, Miss: sdk.MissNext, After: []string{UnSNAT}},
		{Name: CTMark, Pipeline: ip, Stage: flow.StageConntrackState, Miss: sdk.MissNext, After: []string{Conntrack}},
		// Misses skip the two tables below (StaticFlows).
		{Name: LB, Pipeline: ip, Stage: flow.StagePreRouting, Miss: sdk.MissDrop},
		// Only reached by resubmit from service.lb (Services with
		// sessionAffinity ClientIP): a miss returns to the caller.
		{Name: Affinity, Pipeline: ip, Stage: flow.StagePreRouting, Miss: sdk.MissDrop, After: []string{LB}},
		// Only reached by goto from service.lb for those Services.
		{Name: Select, Pipeline: ip, Stage: flow.StagePreRouting, Miss: sdk.MissDrop, After: []string{Affinity}},
		{Name: DNAT, Pipeline: ip, Stage: flow.StagePreRouting, Miss: sdk.MissNext, After: []string{Select}},
		{Name: L4, Pipeline: ip, Stage: flow.StagePreRouting, Miss: sdk.MissNext, After: []string{DNAT}},
		{Name: Inject, Pipeline: ip, Stage: flow.StagePreRouting, Miss: sdk.MissNext, After: []string{L4}},
		{Name: SNAT, Pipeline: ip, Stage: flow.StagePostRouting, Miss: sdk.MissNext},
		// The last stage before Output, whose first table is podnet's:
		// a hairpin packet leaves here, after every policy stage.
		{Name: Output, Pipeline: ip, Stage: flow.StageConntrack, Miss: sdk.MissNext},
	}
}

// Register fields.
var (
	// FieldSvc is the group ID of the Service port a new connection is
	// balanced by; the dnat flows match it, so two Services sharing an
	// endpoint never share a flow.
	FieldSvc = flow.Field{Name: "service.svc", Width: 24}
	// FieldEPIP and FieldEPPort are the endpoint a group bucket chose.
	// FieldEPIP holds an IPv4 endpoint, or the low 32 bits of an IPv6 one
	// (a packet is of one family, so the word is shared).
	FieldEPIP   = flow.Field{Name: "service.ep_ip", Width: 32}
	FieldEPPort = flow.Field{Name: "service.ep_port", Width: 16}
	// FieldEPIP6 are the upper three words of an IPv6 endpoint, most
	// significant first (bits 127..96, 95..64, 63..32): a register field
	// is at most 32 bits and never spans two registers.
	FieldEPIP6 = [3]flow.Field{
		{Name: "service.ep_ip6_0", Width: 32},
		{Name: "service.ep_ip6_1", Width: 32},
		{Name: "service.ep_ip6_2", Width: 32},
	}
	// FieldHairpin marks a packet of a connection from an endpoint to
	// itself through its Service.
	FieldHairpin = flow.Field{Name: "service.hairpin", Width: 1}
	// FieldAffinity says a learned session-affinity flow chose the
	// endpoint (FieldEPIP, FieldEPPort) for this client.
	FieldAffinity = flow.Field{Name: "service.affinity", Width: 1}
	// FieldSNAT marks a packet of a NodePort connection with
	// externalTrafficPolicy Cluster: its source becomes the node's
	// gateway IP, so the endpoint (maybe on another node) answers here.
	FieldSNAT = flow.Field{Name: "service.snat", Width: 1}
)

// Fields lists the register fields the plugin requests: the three upper
// words of an IPv6 endpoint only when it balances IPv6 Services (ipv6),
// so an IPv4-only node leaves those 96 register bits to other plugins.
func Fields(ipv6 bool) []flow.Field {
	fs := []flow.Field{FieldSvc, FieldEPIP, FieldEPPort, FieldHairpin, FieldSNAT, FieldAffinity}
	if ipv6 {
		fs = append(fs, FieldEPIP6[:]...)
	}
	return fs
}

// Shared resources, by name.
const (
	ResDNATZone = "service.dnat_zone"
	ResSNATZone = "service.snat_zone"
	// ResCTMark is three bits of ct_mark: the low one says "a Service
	// connection" (published, so a policy plugin can tell Service traffic
	// apart), the next "hairpin", the high one "SNAT to the gateway IP".
	ResCTMark = "service.ct_mark"
)

// Resources declares the ct zones and ct_mark bits.
func Resources() []sdk.Resource {
	return []sdk.Resource{
		{Kind: sdk.ResourceCTZone, Name: ResDNATZone},
		{Kind: sdk.ResourceCTZone, Name: ResSNATZone},
		{Kind: sdk.ResourceCTMark, Name: ResCTMark, Width: 3, Exported: true},
	}
}

// DefaultHairpinIP is the source a hairpin connection is SNATed to, and
// the next hop of the node's route to the Service CIDR. It is link-local:
// no pod or node owns it.
var DefaultHairpinIP = netip.MustParseAddr("169.254.0.253")

// DefaultNodePortIP is where the node's kernel sends NodePort traffic
// (a DNAT in nftables, package hostnet): into br-int through the gateway,
// where the NodePort's flows balance it.
var DefaultNodePortIP = netip.MustParseAddr("169.254.0.252")

// DefaultHairpinIPv6 and DefaultNodePortIPv6 are their IPv6 counterparts.
// They are unique local addresses (fd00::/8), not link-local: a pod holds
// fe80::/64 on-link on its interface, so it would solicit a link-local
// hairpin source instead of answering it through its gateway.
var (
	DefaultHairpinIPv6  = netip.MustParseAddr("fd00:5ce::fd")
	DefaultNodePortIPv6 = netip.MustParseAddr("fd00:5ce::fc")
)

// Local is what the flows need of this node: the granted zones and bits,
// and its addresses.
type Local struct {
	DNATZone, SNATZone uint16
	// MarkOffset is the first ct_mark bit granted.
	MarkOffset uint8
	HairpinIP  netip.Addr
	// GatewayIP is the node's IPv4 gateway address, the source NodePort
	// connections with externalTrafficPolicy Cluster get (invalid: none).
	GatewayIP netip.Addr
	// NodePortIP is where the node's kernel DNATs NodePort traffic to;
	// GatewayMAC the gateway device's address. With both, the answers of
	// NodePort connections go back to the node's kernel (none: they are
	// routed by their destination, which works for clients outside the
	// cluster only).
	NodePortIP netip.Addr
	GatewayMAC net.HardwareAddr
	// HairpinIP6, GatewayIP6 and NodePortIP6 are the IPv6 counterparts
	// (invalid: no IPv6 flows of that kind).
	HairpinIP6, GatewayIP6, NodePortIP6 netip.Addr
}

// family is what the flows of one IP family need of Local.
type family struct {
	v                          flow.IPVersion
	hairpin, gateway, nodePort netip.Addr
}

func (l Local) families() []family {
	fs := []family{{flow.V4, l.HairpinIP, l.GatewayIP, l.NodePortIP}}
	if l.HairpinIP6.IsValid() {
		fs = append(fs, family{flow.V6, l.HairpinIP6, l.GatewayIP6, l.NodePortIP6})
	}
	return fs
}

// versionOf is the IP version of a.
func versionOf(a netip.Addr) flow.IPVersion {
	if a.Is4() {
		return flow.V4
	}
	return flow.V6
}

// host is the prefix of a alone.
func host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// LocalOf reads the grants of an assignment.
func LocalOf(grants map[string]sdk.Grant, hairpin netip.Addr) (Local, error) {
	d, ok1 := grants[ResDNATZone]
	s, ok2 := grants[ResSNATZone]
	m, ok3 := grants[ResCTMark]
	if !ok1 || !ok2 || !ok3 {
		return Local{}, fmt.Errorf("the host granted none of %s, %s, %s (got %v); is the agent older than the service plugin?", ResDNATZone, ResSNATZone, ResCTMark, grants)
	}
	return Local{DNATZone: uint16(d.Value), SNATZone: uint16(s.Value), MarkOffset: m.Offset, HairpinIP: hairpin}, nil
}

// MarkService and MarkHairpin are the ct_mark bits.
func (l Local) MarkService() uint32 { return 1 << l.MarkOffset }
func (l Local) MarkHairpin() uint32 { return 1 << (l.MarkOffset + 1) }
func (l Local) MarkSNAT() uint32    { return 1 << (l.MarkOffset + 2) }
func (l Local) markMask() uint32    { return l.MarkService() | l.MarkHairpin() | l.MarkSNAT() }

// Priorities.
const (
	prioMiss    = 1
	prioDefault = 100
	prioService = 200
	prioHairpin = 210
	// In-cluster clients of an externalTrafficPolicy Local address.
	prioInCluster = 205
	// A hairpin from the gateway: back out of it (above) or routed.
	prioGatewayHairpin = 220
	prioGatewayRouted  = 215
)

// Tracked connection states.
var (
	trkNew = flow.Match{}.CTState(flow.CTTracked|flow.CTNew, flow.CTTracked|flow.CTNew)
	trkFw  = flow.Match{}.CTState(flow.CTTracked, flow.CTTracked|flow.CTReply)
)

// StaticFlows are the node-wide flows: conntrack for every IP packet, the
// hairpin SNAT and its undoing, and hairpin output; for IPv4, and for IPv6
// when l has a HairpinIP6.
func StaticFlows(l Local) []flow.Flow {
	hairpin := flow.Match{}.Field(FieldHairpin, 1)
	next := flow.NextTable()
	fams := l.families()
	var fs []flow.Flow
	for _, fam := range fams {
		ip := flow.Match{}.IP(fam.v)
		fs = append(fs,
			flow.Flow{Table: UnSNAT, Priority: prioService, Match: ip.IPDst(host(fam.hairpin)),
				Actions: []flow.Action{flow.Conntrack(flow.CT{Zone: l.SNATZone, NAT: &flow.NAT{}, Resume: next})}},
			flow.Flow{Table: Conntrack, Priority: prioDefault, Match: ip,
				Actions: []flow.Action{flow.Conntrack(flow.CT{Zone: l.DNATZone, NAT: &flow.NAT{}, Resume: next})}},
			flow.Flow{Table: CTMark, Priority: prioService, Match: ip.CTMark(l.MarkHairpin(), l.MarkHairpin()),
				Actions: []flow.Action{flow.LoadField(FieldHairpin, 1)}, Goto: next},
			// Every packet of a hairpin connection in the original direction:
			// the first commits the SNAT, later ones get the same binding
			// (a commit on an existing connection keeps its NAT).
			flow.Flow{Table: SNAT, Priority: prioService, Match: trkFw.IP(fam.v).Field(FieldHairpin, 1),
				Actions: []flow.Action{flow.Conntrack(flow.CT{Commit: true, Zone: l.SNATZone, Resume: next,
					NAT: &flow.NAT{Kind: flow.NATSrc, MinAddr: fam.hairpin}})}},
		)
		if fam.v == flow.V4 {
			fs = append(fs,
				flow.Flow{Table: Output, Priority: prioService, Match: hairpin.Field(flow.FieldOutputReady, 1),
					Actions: []flow.Action{flow.OutputInPort()}},
				// What no Service flow claims passes service.affinity and
				// service.select, which only resubmits and gotos reach.
				flow.Flow{Table: LB, Priority: prioMiss, Goto: flow.GotoTable(DNAT)},
			)
		}
		if fam.nodePort.IsValid() && len(l.GatewayMAC) == 6 {
			// The answers of every NodePort connection leave through the
			// gateway, whoever the client: the node's kernel DNATed the node's
			// address to NodePortIP, and only it can undo that. Routed by
			// their destination instead, answers to a pod (a pod dialling a
			// node's address) would reach it from NodePortIP, an address it
			// never dialled, and it would drop them. After the un-DNAT in
			// service.conntrack only such answers come from NodePortIP, which
			// nothing owns. Here, after Routing: the Switching stage sends the
			// packet to the gateway port by its MAC.
			fromNodePort := ip.IPSrc(host(fam.nodePort))
			fs = append(fs,
				flow.Flow{Table: SNAT, Priority: prioDefault, Match: fromNodePort,
					Actions: []flow.Action{flow.SetEthDst(l.GatewayMAC)}, Goto: next},
				// An endpoint that reached itself through its node's NodePort
				// is a hairpin too, but its answers go to the gateway like the
				// others, not back out of the endpoint's port.
				flow.Flow{Table: Output, Priority: prioHairpin, Match: fromNodePort.Field(FieldHairpin, 1).Field(flow.FieldOutputReady, 1),
					Goto: next},
			)
		}
		if fam.v == flow.V4 && len(l.GatewayMAC) == 6 {
			// A hairpin that entered from the gateway goes back out of it only
			// when it is routed to the gateway (a host-network endpoint, which
			// is the node itself); an endpoint pod that reached itself through
			// its node's NodePort comes from the gateway too, and is delivered
			// to its own port like any routed packet. (Either family.)
			fromGW := hairpin.Field(flow.FieldOutputReady, 1).Field(flow.FieldPacketSource, flow.PacketSourceGateway)
			fs = append(fs,
				flow.Flow{Table: Output, Priority: prioGatewayHairpin, Match: fromGW.EthDst(l.GatewayMAC),
					Actions: []flow.Action{flow.OutputInPort()}},
				flow.Flow{Table: Output, Priority: prioGatewayRouted, Match: fromGW, Goto: next},
			)
		}
		if fam.gateway.IsValid() {
			fs = append(fs,
				// Answers to NodePort connections SNATed to the gateway IP;
				// anything else to the gateway IP finds no entry and passes.
				flow.Flow{Table: UnSNAT, Priority: prioService, Match: ip.IPDst(host(fam.gateway)),
					Actions: []flow.Action{flow.Conntrack(flow.CT{Zone: l.SNATZone, NAT: &flow.NAT{}, Resume: next})}},
				flow.Flow{Table: CTMark, Priority: prioService, Match: ip.CTMark(l.MarkSNAT(), l.MarkSNAT()),
					Actions: []flow.Action{flow.LoadField(FieldSNAT, 1)}, Goto: next},
				flow.Flow{Table: SNAT, Priority: prioService, Match: trkFw.IP(fam.v).Field(FieldSNAT, 1),
					Actions: []flow.Action{flow.Conntrack(flow.CT{Commit: true, Zone: l.SNATZone, Resume: next,
						NAT: &flow.NAT{Kind: flow.NATSrc, MinAddr: fam.gateway}})}},
			)
		}
	}
	return fs
}

// Protocol numbers of the Service protocols.
const (
	ProtoTCP  = flow.ProtoTCP
	ProtoUDP  = flow.ProtoUDP
	ProtoSCTP = flow.ProtoSCTP
)

// Endpoint is one backend of a Service port.
type Endpoint struct {
	IP   netip.Addr
	Port uint16
	// Local: the endpoint is a pod of this node, so it may be its own
	// client (hairpin).
	Local bool
}

// Port is one port of one Service, as the switch balances it.
type Port struct {
	// Service is namespace/name; Name the port's name.
	Service, Name string
	Proto         uint8
	ClusterIP     netip.Addr
	Port          uint16
	// Group is the select group's local ID, also loaded into FieldSvc.
	Group     uint32
	Endpoints []Endpoint
	// SNAT: new connections get the gateway IP as source (a NodePort with
	// externalTrafficPolicy Cluster).
	SNAT bool
	// Affinity, when not zero, pins a client to its endpoint for that many
	// seconds after its last new connection (sessionAffinity ClientIP).
	Affinity uint16
	// InCluster, on an address with externalTrafficPolicy Local (a
	// NodePort, an external or load-balancer IP), lists the sources that
	// are inside the cluster (this node's pods, the node itself). As
	// Kubernetes asks, they get the Service's cluster-wide endpoints
	// (InClusterGroup, the ClusterIP port's group, whose dnat flows exist),
	// not only this node's: the policy is about external clients, and a pod
	// on a node without a local endpoint would otherwise be refused.
	InCluster      []netip.Prefix
	InClusterGroup uint32
	// Sources, when set, limits the port to new connections from these
	// prefixes (at the in-cluster priority, above the address's own
	// port): the pods of other nodes dialling a Local address, which get
	// every endpoint, SNATed so that answers come back through this node.
	Sources []netip.Prefix
}

// ServiceTag is the cookie tag of a Service's flows: a hash of
// namespace/name.
func ServiceTag(service string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(service))
	return h.Sum32()
}

// RejectUserdata marks the packet-ins of the lb table's reject flows.
var RejectUserdata = []byte("reject")

// RejectMaxLen is how much of a rejected packet the switch sends up:
// enough for the headers an answer quotes.
const RejectMaxLen = 128

// RejectMeterID is the meter that bounds how many packets to Services
// without endpoints the switch sends the plugin: a flood towards such a
// Service costs the plugin and the agent at most its rate.
const RejectMeterID = 1

// RejectMeter is that meter: 1000 packets per second, bursts of 2000.
func RejectMeter() flow.Meter {
	return flow.Meter{ID: RejectMeterID, Unit: flow.MeterPktps, Bands: []flow.MeterBand{{Rate: 1000, Burst: 2000}}}
}

// v is the port's IP version: its address's.
func (p Port) v() flow.IPVersion { return versionOf(p.ClusterIP) }

func (p Port) dstMatch() flow.Match {
	m := trkNew.L4(p.v(), p.Proto).IPDst(host(p.ClusterIP))
	switch p.Proto {
	case ProtoTCP:
		m = m.TCPDst(p.Port)
	case ProtoUDP:
		m = m.UDPDst(p.Port)
	case ProtoSCTP:
		m = m.SCTPDst(p.Port)
	}
	return m
}

// PortFlows are the flows of one Service port and its select group (nil
// when the port has no endpoint: new connections are then rejected).
func PortFlows(l Local, p Port) ([]flow.Flow, *flow.Group) {
	tag := ServiceTag(p.Service)
	// A port balances over the endpoints of its own family only.
	p.Endpoints = slices.DeleteFunc(slices.Clone(p.Endpoints), func(e Endpoint) bool { return versionOf(e.IP) != p.v() })
	var inCluster []flow.Flow
	if p.InClusterGroup != 0 {
		for _, src := range p.InCluster {
			if versionOf(src.Addr()) == p.v() {
				f := p.balance(p.InClusterGroup)
				f.Priority, f.Match, f.Tag = prioInCluster, f.Match.IPSrc(src), tag
				inCluster = append(inCluster, f)
			}
		}
	}
	if len(p.Endpoints) == 0 {
		if len(p.Sources) > 0 {
			return inCluster, nil // the address's own port answers them
		}
		return append(inCluster, flow.Flow{Table: LB, Priority: prioService, Match: p.dstMatch(), Tag: tag,
			Actions: []flow.Action{flow.ControllerMetered(RejectMaxLen, RejectUserdata, flow.ReasonAction, RejectMeterID)}}), nil
	}
	lb := p.balance(p.Group)
	lb.Tag = tag
	fs := []flow.Flow{lb}
	if len(p.Sources) > 0 {
		fs = fs[:0]
		for _, src := range p.Sources {
			if versionOf(src.Addr()) == p.v() {
				f := lb
				f.Priority, f.Match = prioInCluster, lb.Match.IPSrc(src)
				fs = append(fs, f)
			}
		}
	}
	fs = append(fs, inCluster...)
	if p.Affinity != 0 {
		svc := flow.Match{}.Field(FieldSvc, p.Group)
		fs = append(fs,
			flow.Flow{Table: Select, Priority: prioHairpin, Match: svc.Field(FieldAffinity, 1), Tag: tag,
				Goto: flow.GotoTable(DNAT)},
			flow.Flow{Table: Select, Priority: prioService, Match: svc, Tag: tag,
				Actions: []flow.Action{flow.ApplyGroup(p.Group)}},
			// A learned endpoint that has left the Service: choose again.
			flow.Flow{Table: DNAT, Priority: prioDefault, Match: svc.Field(FieldAffinity, 1), Tag: tag,
				Actions: []flow.Action{flow.LoadField(FieldAffinity, 0), flow.ApplyGroup(p.Group)}},
		)
	}
	g := &flow.Group{ID: p.Group, Type: flow.GroupSelect, Selection: &flow.Selection{Method: flow.SelectDPHash}}
	for _, e := range p.Endpoints {
		var loads []flow.Action
		m := flow.Match{}.L4(p.v(), p.Proto).Field(FieldSvc, p.Group)
		for _, w := range epWords(e.IP) {
			loads = append(loads, flow.LoadField(w.f, w.v))
			m = m.Field(w.f, w.v)
		}
		g.Buckets = append(g.Buckets, flow.Bucket{Weight: 100, Actions: append(loads,
			flow.LoadField(FieldEPPort, uint32(e.Port)), flow.Resubmit(flow.GotoTable(DNAT)))})
		m = m.Field(FieldEPPort, uint32(e.Port))
		nat := &flow.NAT{Kind: flow.NATDst, MinAddr: e.IP, MinPort: e.Port}
		if p.Proto == ProtoSCTP {
			// The userspace datapath's conntrack tracks SCTP by address
			// only and cannot translate its ports: service.l4 does.
			nat.MinPort = 0
		}
		ct := func(mark uint32) flow.Action {
			return flow.Conntrack(flow.CT{Commit: true, Zone: l.DNATZone, Resume: flow.NextTable(),
				NAT: nat, Mark: mark, MarkMask: l.markMask()})
		}
		acts := []flow.Action{ct(l.MarkService())}
		if p.SNAT {
			acts = []flow.Action{flow.LoadField(FieldSNAT, 1), ct(l.MarkService() | l.MarkSNAT())}
		}
		if p.Affinity != 0 {
			acts = append([]flow.Action{p.learn()}, acts...)
		}
		fs = append(fs, flow.Flow{Table: DNAT, Priority: prioService, Match: m, Tag: tag, Actions: acts})
		if e.Local {
			// The endpoint is its own client: mark the connection (later
			// packets get the register from service.ct_mark) and this
			// packet, for the SNAT and the output to IN_PORT.
			fs = append(fs, flow.Flow{Table: DNAT, Priority: prioHairpin, Match: m.IPSrc(host(e.IP)), Tag: tag,
				Actions: []flow.Action{flow.LoadField(FieldHairpin, 1), ct(l.MarkService() | l.MarkHairpin())}})
		}
	}
	return append(fs, sctpPortFlows(l, p, tag)...), g
}

// balance is the service.lb flow of a new connection to the port, chosen
// among group's endpoints (group's dnat flows translate it).
func (p Port) balance(group uint32) flow.Flow {
	f := flow.Flow{Table: LB, Priority: prioService, Match: p.dstMatch(),
		Actions: []flow.Action{flow.LoadField(FieldSvc, group), flow.ApplyGroup(group)}}
	if p.Affinity != 0 {
		// The client's learned endpoint, if any, then the choice: the
		// learned one, or the group's.
		// (The group runs at the top level of the pipeline, not inside a
		// resubmit: the datapath recirculates for its dp_hash.)
		//
		// The source port is read first (into ep_port, which the choice
		// overwrites) only so that every datapath flow of this path matches
		// it: each new connection then takes the slow path, where the
		// learn takes effect at once. Behind a cached datapath flow the
		// switch replays a learn only at its next revalidation, and a
		// client's next connections, right after its affinity expired, were
		// balanced afresh to other endpoints in that window.
		srcPort := map[uint8]flow.MatchKind{ProtoTCP: flow.MatchTCPSrc, ProtoUDP: flow.MatchUDPSrc, ProtoSCTP: flow.MatchSCTPSrc}[p.Proto]
		f.Actions = []flow.Action{flow.Move(flow.Header(srcPort), flow.Reg(FieldEPPort)),
			flow.LoadField(FieldSvc, group), flow.Resubmit(flow.GotoTable(Affinity))}
		f.Goto = flow.GotoTable(Select)
	}
	return f
}

// learn records (or refreshes) the client's endpoint in service.affinity:
// the client address, the Service address, protocol and port match; the
// endpoint is loaded back.
func (p Port) learn() flow.Action {
	port := map[uint8]flow.MatchKind{ProtoTCP: flow.MatchTCPDst, ProtoUDP: flow.MatchUDPDst, ProtoSCTP: flow.MatchSCTPDst}[p.Proto]
	ethType, src, dst := flow.EthTypeIPv4, flow.MatchIPv4Src, flow.MatchIPv4Dst
	var words []flow.LearnSpec
	if p.v() == flow.V6 {
		ethType, src, dst = flow.EthTypeIPv6, flow.MatchIPv6Src, flow.MatchIPv6Dst
		for _, f := range FieldEPIP6 {
			words = append(words, flow.LearnLoadFrom(flow.Reg(f), flow.Reg(f)))
		}
	}
	specs := []flow.LearnSpec{
		flow.LearnMatchValue(flow.Header(flow.MatchEthType), uint64(ethType)),
		flow.LearnMatchValue(flow.Header(flow.MatchIPProto), uint64(p.Proto)),
		flow.LearnMatchPacket(flow.Header(src)),
		flow.LearnMatchPacket(flow.Header(dst)),
		flow.LearnMatchPacket(flow.Header(port)),
	}
	specs = append(append(specs, words...),
		flow.LearnLoadFrom(flow.Reg(FieldEPIP), flow.Reg(FieldEPIP)),
		flow.LearnLoadFrom(flow.Reg(FieldEPPort), flow.Reg(FieldEPPort)),
		flow.LearnLoadValue(1, flow.Reg(FieldAffinity)),
	)
	return flow.Learn(flow.ActLearn{Table: Affinity, Priority: prioService, IdleTimeout: p.Affinity, Specs: specs})
}

// sctpPortFlows translate an SCTP Service port to its endpoints' target
// ports and back, statelessly, after the DNAT of the address: the switch
// recomputes the SCTP checksum.
func sctpPortFlows(l Local, p Port, tag uint32) []flow.Flow {
	if p.Proto != ProtoSCTP {
		return nil
	}
	svc := flow.Match{}.CTMark(l.MarkService(), l.MarkService()).L4(p.v(), ProtoSCTP)
	fw := svc.CTState(flow.CTTracked, flow.CTTracked|flow.CTReply)
	rpl := svc.CTState(flow.CTTracked|flow.CTReply, flow.CTTracked|flow.CTReply)
	var fs []flow.Flow
	back := map[uint16]bool{}
	for _, e := range p.Endpoints {
		if e.Port == p.Port {
			continue
		}
		fs = append(fs, flow.Flow{Table: L4, Priority: prioService, Match: fw.IPDst(host(e.IP)).SCTPDst(p.Port), Tag: tag,
			Actions: []flow.Action{flow.SetL4Port(flow.MatchSCTPDst, e.Port)}, Goto: flow.NextTable()})
		if !back[e.Port] {
			back[e.Port] = true
			fs = append(fs, flow.Flow{Table: L4, Priority: prioService, Match: rpl.IPSrc(host(p.ClusterIP)).SCTPSrc(e.Port), Tag: tag,
				Actions: []flow.Action{flow.SetL4Port(flow.MatchSCTPSrc, p.Port)}, Goto: flow.NextTable()})
		}
	}
	return fs
}

// epWord is one register word of an endpoint address.
type epWord struct {
	f flow.Field
	v uint32
}

// epWords are the register words that hold endpoint address a: FieldEPIP
// for IPv4; for IPv6 the three FieldEPIP6 words, then its low word in
// FieldEPIP.
func epWords(a netip.Addr) []epWord {
	if a.Is4() {
		return []epWord{{FieldEPIP, binary.BigEndian.Uint32(a.AsSlice())}}
	}
	b := a.As16()
	return []epWord{
		{FieldEPIP6[0], binary.BigEndian.Uint32(b[0:4])},
		{FieldEPIP6[1], binary.BigEndian.Uint32(b[4:8])},
		{FieldEPIP6[2], binary.BigEndian.Uint32(b[8:12])},
		{FieldEPIP, binary.BigEndian.Uint32(b[12:16])},
	}
}
