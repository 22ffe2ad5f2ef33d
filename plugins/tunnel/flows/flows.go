package flows

import (
	"hash/fnv"
	"net"
	"net/netip"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// L3Forward is tunnel's one table: routes to peer pod CIDRs. It sits after
// podnet's l3_forward in the Routing stage, so local pods are matched
// first and everything else falls through to it.
const L3Forward = "tunnel.l3_forward"

// podnet's exported tables tunnel writes into.
const (
	PodnetClassifier = "podnet.classifier"
	PodnetL3Forward  = "podnet.l3_forward"
	PodnetARPForward = "podnet.arp_forward"
	PodnetL2Forward  = "podnet.l2_forward"
)

// RemoteMAC is the destination MAC of a packet routed to a peer node, and
// the MAC the ARP responder gives for every peer gateway. It is locally
// administered and never on a real port; the receiving node rewrites it to
// its own gateway MAC.
var RemoteMAC = net.HardwareAddr{0x0a, 0x58, 0xff, 0xff, 0xff, 0xfe}

// Tables declares tunnel's table.
func Tables() []sdk.Table {
	return []sdk.Table{
		{Name: L3Forward, Pipeline: flow.PipelineIP, Stage: flow.StageRouting, Miss: sdk.MissNext, After: []string{PodnetL3Forward}},
	}
}

// Priorities.
const (
	prioTunnel    = 200 // classification of the tunnel port
	prioPeer      = 200 // a peer pod CIDR
	prioResponder = 150 // above podnet's gateway ARP catch-alls (100, 50)
	prioRemoteMAC = 200
)

// ARP opcodes (RFC 826).
const (
	arpRequest = 1
	arpReply   = 2
)

// Local is what the flows need of this node.
type Local struct {
	// TunnelPort is the tunnel's OpenFlow port.
	TunnelPort uint32
	// GatewayMAC is podnet's gateway MAC, which podnet's delivery flows
	// expect as the destination of routed packets.
	GatewayMAC net.HardwareAddr
	// GatewayIPv4 is the local gateway's IPv4 address: the only asker the
	// ARP responder answers (invalid: no IPv4 pod CIDR, no responder).
	GatewayIPv4 netip.Addr
}

// Peer is another node: where its pods live and how to reach it.
type Peer struct {
	Name string
	// IP is the peer's underlay address, the tunnel's destination.
	IP netip.Addr
	// PodCIDRs are its pod ranges, one per family.
	PodCIDRs []netip.Prefix
	// NodeIPs are all its node addresses (IP among them): pod traffic to
	// any of them keeps the pod's address, whatever the family.
	NodeIPs []netip.Addr
}

// GatewayIP is the gateway address of a pod CIDR: its first host address,
// as podnet's IPAM assigns it.
func GatewayIP(p netip.Prefix) netip.Addr { return p.Masked().Addr().Next() }

// PeerTag is the cookie tag of a peer's flows: a hash of its name.
func PeerTag(name string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return h.Sum32()
}

// StaticFlows classify what arrives from the tunnel and send packets bound
// for RemoteMAC to the tunnel port.
func StaticFlows(l Local) []flow.Flow {
	fromTunnel := []flow.Action{flow.LoadField(flow.FieldPacketSource, flow.PacketSourceTunnel), flow.SetEthDst(l.GatewayMAC)}
	// After classification a tunnelled packet goes straight to the stages
	// after Validation: podnet's spoof guards know local ports only.
	next := flow.GotoPipeline(flow.PipelineIP, flow.StageConntrackState)
	fs := []flow.Flow{
		{Table: PodnetClassifier, Priority: prioTunnel, Match: flow.Match{}.InPort(l.TunnelPort).IPv4(), Actions: fromTunnel, Goto: next},
		{Table: PodnetClassifier, Priority: prioTunnel, Match: flow.Match{}.InPort(l.TunnelPort).IPv6(), Actions: fromTunnel, Goto: next},
		{Table: PodnetL2Forward, Priority: prioRemoteMAC, Match: flow.Match{}.EthDst(RemoteMAC),
			Actions: []flow.Action{flow.LoadField(flow.FieldTargetPort, l.TunnelPort), flow.LoadField(flow.FieldOutputReady, 1)},
			Goto:    flow.NextTable()},
	}
	return fs
}

// PeerFlows route a peer's pod CIDRs into the tunnel and answer ARP for
// its IPv4 gateway. Every flow carries PeerTag(p.Name).
func PeerFlows(l Local, p Peer) []flow.Flow {
	var fs []flow.Flow
	for _, c := range p.PodCIDRs {
		c = c.Masked()
		m := flow.Match{}.IPv4().IPv4DstPrefix(c)
		if c.Addr().Is6() {
			m = flow.Match{}.IPv6().IPv6DstPrefix(c)
		}
		fs = append(fs, flow.Flow{Table: L3Forward, Priority: prioPeer, Match: m,
			Actions: []flow.Action{flow.SetEthSrc(l.GatewayMAC), flow.SetEthDst(RemoteMAC), flow.SetTunDst(p.IP), flow.DecTTL()},
			Goto:    flow.NextTable()})
		if c.Addr().Is4() && l.GatewayIPv4.IsValid() {
			gw := GatewayIP(c)
			fs = append(fs, flow.Flow{Table: PodnetARPForward, Priority: prioResponder,
				Match:   flow.Match{}.ARP().Field(flow.FieldPacketSource, flow.PacketSourceGateway).ARPOp(arpRequest).ARPTpa(gw),
				Actions: arpAnswer(l, gw)})
		}
	}
	tag := PeerTag(p.Name)
	for i := range fs {
		fs[i].Tag = tag
	}
	return fs
}

// arpAnswer turns the local gateway's request for a peer gateway gw into
// the reply (gw is at RemoteMAC) and sends it back out of the gateway
// port. The asker is known, so every field is a constant.
func arpAnswer(l Local, gw netip.Addr) []flow.Action {
	return []flow.Action{
		flow.SetEthDst(l.GatewayMAC), flow.SetEthSrc(RemoteMAC),
		flow.SetARPOp(arpReply),
		flow.SetARPTha(l.GatewayMAC), flow.SetARPTpa(l.GatewayIPv4),
		flow.SetARPSha(RemoteMAC), flow.SetARPSpa(gw),
		flow.OutputInPort(),
	}
}
