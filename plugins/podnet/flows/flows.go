package flows

import (
	"net"
	"net/netip"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Table names. They are global on the node, hence the prefix.
const (
	Classifier = "podnet.classifier"
	ARPGuard   = "podnet.arp_guard"
	ARPForward = "podnet.arp_forward"
	IPGuard    = "podnet.ip_guard"
	L3Forward  = "podnet.l3_forward"
	L2Forward  = "podnet.l2_forward"
	Output     = "podnet.output"
)

// Tables declares podnet's tables. The classifier, arp_forward and
// l2_forward are exported so an overlay plugin can classify its tunnel
// port, answer ARP for remote gateways and send to remote MACs; the guards
// are private, so nobody can punch a hole in them.
func Tables() []sdk.Table {
	return []sdk.Table{
		{Name: Classifier, Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier, Miss: sdk.MissDrop, Exported: true},
		{Name: ARPGuard, Pipeline: flow.PipelineARP, Stage: flow.StageValidation, Miss: sdk.MissDrop},
		{Name: ARPForward, Pipeline: flow.PipelineARP, Stage: flow.StageOutput, Miss: sdk.MissDrop, Exported: true},
		{Name: IPGuard, Pipeline: flow.PipelineIP, Stage: flow.StageValidation, Miss: sdk.MissDrop},
		{Name: L3Forward, Pipeline: flow.PipelineIP, Stage: flow.StageRouting, Miss: sdk.MissNext},
		{Name: L2Forward, Pipeline: flow.PipelineIP, Stage: flow.StageSwitching, Miss: sdk.MissDrop, Exported: true},
		{Name: Output, Pipeline: flow.PipelineIP, Stage: flow.StageOutput, Miss: sdk.MissDrop},
	}
}

// Priorities. Specific pod flows sit above the gateway's catch-alls.
const (
	prioPod       = 200
	prioPodHigh   = 210
	prioResponder = 220
	prioGateway   = 100
	prioDefault   = 50
)

// ARP opcodes (RFC 826).
const (
	arpRequest = 1
	arpOpReply = 2
)

// arpReply rewrites a request from (podMAC, podIP) for gwIP into the reply
// gwMAC gives, and sends it back to the asking port.
func arpReply(gwMAC net.HardwareAddr, gwIP netip.Addr, podMAC net.HardwareAddr, podIP netip.Addr) []flow.Action {
	return []flow.Action{
		flow.SetEthDst(podMAC), flow.SetEthSrc(gwMAC),
		flow.SetARPOp(arpOpReply),
		flow.SetARPTha(podMAC), flow.SetARPTpa(podIP),
		flow.SetARPSha(gwMAC), flow.SetARPSpa(gwIP),
		flow.OutputInPort(),
	}
}

// Endpoint is a port on br-int with its addresses: the gateway or a pod.
type Endpoint struct {
	OFPort uint32
	MAC    net.HardwareAddr
	IPs    []netip.Addr
}

func (e Endpoint) ip4() (netip.Addr, bool) {
	for _, a := range e.IPs {
		if a.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func (e Endpoint) ip6() (netip.Addr, bool) {
	for _, a := range e.IPs {
		if a.Is6() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// linkLocal is where IPv6 neighbour discovery comes from.
var linkLocal = netip.MustParsePrefix("fe80::/10")

// solicitedNodes holds every solicited-node multicast address (RFC 4291
// 2.7.1).
var solicitedNodes = netip.MustParsePrefix("ff02::1:ff00:0/104")

// SolicitedNode returns the solicited-node multicast address of a (RFC
// 4291 2.7.1), where neighbour solicitations for a are sent.
func SolicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 10: 0, 11: 0x01, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

func toPort(port uint32) []flow.Action {
	return []flow.Action{flow.LoadField(flow.FieldTargetPort, port), flow.LoadField(flow.FieldOutputReady, 1)}
}

// StaticFlows do not depend on any endpoint. Besides the output flow they
// classify every packet the gateway (or another plugin) does not claim as
// coming from a local pod: a pod needs no classifier flow of its own, and a
// port nobody classified is then held to a pod's spoof guard, which it
// cannot pass, so it is dropped.
func StaticFlows() []flow.Flow {
	local := []flow.Action{flow.LoadField(flow.FieldPacketSource, flow.PacketSourceLocal)}
	return []flow.Flow{
		{Table: Classifier, Priority: prioDefault, Match: flow.Match{}.ARP(), Actions: local,
			Goto: flow.GotoPipeline(flow.PipelineARP, flow.StageValidation)},
		{Table: Classifier, Priority: prioDefault, Match: flow.Match{}.IPv4(), Actions: local,
			Goto: flow.GotoPipeline(flow.PipelineIP, flow.StageValidation)},
		{Table: Classifier, Priority: prioDefault, Match: flow.Match{}.IPv6(), Actions: local,
			Goto: flow.GotoPipeline(flow.PipelineIP, flow.StageValidation)},
		{Table: Output, Priority: prioPod, Match: flow.Match{}.Field(flow.FieldOutputReady, 1),
			Actions: []flow.Action{flow.OutputField(flow.FieldTargetPort)}},
	}
}

// GatewayFlows attach the gateway port. Traffic from the gateway is
// trusted: the node routes anything to its pods through it. They also hold
// the node-wide ARP and neighbour-discovery delivery, which needs no flow
// per pod: a pod's ARP that the responder does not answer (its gratuitous
// ARP, its replies) goes to the gateway, the gateway's ARP and neighbour
// solicitations are flooded by the switch's normal L2 processing, and only
// the pod that owns the address answers.
func GatewayFlows(gw Endpoint) []flow.Flow {
	tag := gw.OFPort
	fromGW := flow.Match{}.Field(flow.FieldPacketSource, flow.PacketSourceGateway)
	fromPod := flow.Match{}.Field(flow.FieldPacketSource, flow.PacketSourceLocal)
	fs := []flow.Flow{
		{Table: Classifier, Priority: prioGateway, Match: flow.Match{}.InPort(gw.OFPort).ARP(),
			Actions: []flow.Action{flow.LoadField(flow.FieldPacketSource, flow.PacketSourceGateway)},
			Goto:    flow.GotoPipeline(flow.PipelineARP, flow.StageValidation)},
		{Table: ARPGuard, Priority: prioGateway, Match: flow.Match{}.InPort(gw.OFPort).ARP(), Goto: flow.NextTable()},
		{Table: ARPForward, Priority: prioDefault, Match: fromPod.ARP(), Actions: []flow.Action{flow.Output(gw.OFPort)}},
		{Table: ARPForward, Priority: prioDefault, Match: fromGW.ARP(), Actions: []flow.Action{flow.Normal()}},
		{Table: IPGuard, Priority: prioGateway, Match: flow.Match{}.InPort(gw.OFPort), Goto: flow.NextTable()},
		{Table: L2Forward, Priority: prioGateway, Match: flow.Match{}.EthDst(gw.MAC), Actions: toPort(gw.OFPort), Goto: flow.NextTable()},
	}
	if ip, ok := gw.ip4(); ok {
		fs = append(fs,
			flow.Flow{Table: Classifier, Priority: prioGateway, Match: flow.Match{}.InPort(gw.OFPort).IPv4(),
				Actions: []flow.Action{flow.LoadField(flow.FieldPacketSource, flow.PacketSourceGateway)},
				Goto:    flow.GotoPipeline(flow.PipelineIP, flow.StageValidation)},
			flow.Flow{Table: ARPForward, Priority: prioGateway, Match: flow.Match{}.ARP().ARPTpa(ip), Actions: []flow.Action{flow.Output(gw.OFPort)}},
		)
	}
	if ip, ok := gw.ip6(); ok {
		fs = append(fs,
			flow.Flow{Table: Classifier, Priority: prioGateway, Match: flow.Match{}.InPort(gw.OFPort).IPv6(),
				Actions: []flow.Action{flow.LoadField(flow.FieldPacketSource, flow.PacketSourceGateway)},
				Goto:    flow.GotoPipeline(flow.PipelineIP, flow.StageValidation)},
			// Neighbour solicitations for the gateway go to the gateway.
			flow.Flow{Table: L2Forward, Priority: prioGateway, Match: flow.Match{}.IPv6().IPv6DstPrefix(netip.PrefixFrom(SolicitedNode(ip), 128)),
				Actions: toPort(gw.OFPort), Goto: flow.NextTable()},
			// The gateway's solicitations for a pod: every pod sees them,
			// only the owner of the target address answers.
			flow.Flow{Table: L2Forward, Priority: prioDefault, Match: fromGW.IPv6().IPv6DstPrefix(solicitedNodes),
				Actions: []flow.Action{flow.Normal()}},
		)
	}
	for i := range fs {
		fs[i].Tag = tag
	}
	return fs
}

// PodFlows attach one pod: its spoof guards, the gateway's ARP responder,
// and L3 and L2 delivery to it. Every flow carries the pod's ofport as its
// tag, so `ovs-ofctl dump-flows` shows which pod a flow belongs to.
func PodFlows(gw, pod Endpoint) []flow.Flow {
	in := flow.Match{}.InPort(pod.OFPort)
	var fs []flow.Flow
	gwIP, gwOK := gw.ip4()
	if ip, ok := pod.ip4(); ok && gwOK {
		fs = append(fs,
			// Spoof guard: sender IP and MAC must both be the pod's own.
			flow.Flow{Table: ARPGuard, Priority: prioPod, Match: in.ARP().EthSrc(pod.MAC).ARPSha(pod.MAC).ARPSpa(ip), Goto: flow.NextTable()},
			flow.Flow{Table: IPGuard, Priority: prioPod, Match: in.IPv4().EthSrc(pod.MAC).IPv4Src(ip), Goto: flow.NextTable()},
			// ARP responder: the switch answers the pod's request for its
			// gateway itself, turning the request into the reply in place
			// and sending it back where it came from. Pods resolve their
			// gateway without a round trip to the node's kernel.
			flow.Flow{Table: ARPForward, Priority: prioResponder, Match: in.ARP().ARPOp(arpRequest).ARPTpa(gwIP),
				Actions: arpReply(gw.MAC, gwIP, pod.MAC, ip)},
			flow.Flow{Table: L3Forward, Priority: prioPod, Match: flow.Match{}.IPv4().EthDst(gw.MAC).IPv4Dst(ip),
				Actions: []flow.Action{flow.SetEthSrc(gw.MAC), flow.SetEthDst(pod.MAC), flow.DecTTL()}, Goto: flow.NextTable()},
		)
	}
	if ip, ok := pod.ip6(); ok {
		fs = append(fs,
			flow.Flow{Table: IPGuard, Priority: prioPod, Match: in.IPv6().EthSrc(pod.MAC).IPv6SrcPrefix(netip.PrefixFrom(ip, 128)), Goto: flow.NextTable()},
			// Neighbour discovery is sent from link-local addresses.
			flow.Flow{Table: IPGuard, Priority: prioPod, Match: in.IPv6().EthSrc(pod.MAC).IPv6SrcPrefix(linkLocal), Goto: flow.NextTable()},
			flow.Flow{Table: L3Forward, Priority: prioPod, Match: flow.Match{}.IPv6().EthDst(gw.MAC).IPv6DstPrefix(netip.PrefixFrom(ip, 128)),
				Actions: []flow.Action{flow.SetEthSrc(gw.MAC), flow.SetEthDst(pod.MAC), flow.DecTTL()}, Goto: flow.NextTable()},
		)
	}
	fs = append(fs, flow.Flow{Table: L2Forward, Priority: prioPod, Match: flow.Match{}.EthDst(pod.MAC),
		Actions: toPort(pod.OFPort), Goto: flow.NextTable()})
	for i := range fs {
		fs[i].Tag = pod.OFPort
	}
	return fs
}
