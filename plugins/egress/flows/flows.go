// Package flows computes the egress plugin's OpenFlow flows: pure
// functions of the node, the cluster's destinations to leave alone and
// the selected pods, so the exact flow set is unit-tested and a diff of
// two computations is what to change on the switch.
//
// One table, egress.mark, in the IP pipeline's Routing stage after
// podnet.l3_forward and tunnel.l3_forward (so pod-to-pod traffic, local
// or remote, never reaches it):
//
//	priority 300  nw_dst in a kept CIDR (pod CIDRs, node IPs, Service
//	              CIDRs, exceptCIDRs)                   → next (no Egress)
//	priority 200  from a local selected pod whose Egress IP is held
//	              elsewhere: to the holder through tunnel's port
//	              (eth_dst=tunnel's RemoteMAC, tun_dst=holder)
//	priority 200  from a local selected pod, IP held here: pkt_mark=id
//	priority 200  from the tunnel (sdk.pkt_source=3), source a selected
//	              pod of another node, IP held here: pkt_mark=id
//	miss          → next (the gateway, where tunnel masquerades)
//
// The mark is the plugin's pkt_mark grant ("egress.snat", published so
// netpol and others can recognise Egress traffic). On the kernel datapath
// it reaches nftables with the packet; the userspace datapath does not
// carry pkt_mark through a tap device, so the SNAT rules also match the
// selected pods' source addresses (package hostnet).
//
// Every flow of one pod carries the pod's tag, so dump-flows says which
// pod a flow is for.
package flows

import (
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Mark is the egress plugin's table.
const Mark = "egress.mark"

// Tables of other plugins this one is ordered after.
const (
	PodnetL3Forward = "podnet.l3_forward"
	TunnelL3Forward = "tunnel.l3_forward"
)

// MarkResource is the name of the pkt_mark grant.
const MarkResource = "egress.snat"

// MarkWidth is how many pkt_mark bits the plugin asks for: 255 Egress IPs
// held per node.
const MarkWidth = 8

// RemoteMAC is tunnel's destination MAC for a packet to a peer node (see
// plugins/tunnel/flows.RemoteMAC): podnet.l2_forward sends it to the
// tunnel port.
var RemoteMAC = net.HardwareAddr{0x0a, 0x58, 0xff, 0xff, 0xff, 0xfe}

// Tables declares the plugin's table.
func Tables() []sdk.Table {
	return []sdk.Table{{Name: Mark, Pipeline: flow.PipelineIP, Stage: flow.StageRouting, Miss: sdk.MissNext,
		After: []string{PodnetL3Forward, TunnelL3Forward}}}
}

const (
	prioKeep = 300
	prioPod  = 200
)

// Local is what the flows need of this node.
type Local struct {
	GatewayMAC net.HardwareAddr
	// Mark is the pkt_mark grant.
	Mark sdk.Grant
}

// Pod is one selected pod and where its Egress IP lives.
type Pod struct {
	// Key is namespace/name, for the tag.
	Key string
	IP  netip.Addr
	// Local: the pod runs on this node.
	Local bool
	// Holder is the underlay IP of the node holding the Egress IP; invalid
	// when this node holds it.
	Holder netip.Addr
	// MarkID is the IP's mark on this node (1..255) when this node holds it.
	MarkID uint32
	// Meter is the Egress's bandwidth meter (a local meter ID) when this
	// node holds the IP and the Egress has a bandwidth; 0 for none.
	Meter uint32
}

// Tag is the cookie tag of a pod's flows.
func Tag(key string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32()
}

// KeepFlows let traffic to the kept CIDRs pass unmarked.
func KeepFlows(keep []netip.Prefix) []flow.Flow {
	var fs []flow.Flow
	for _, p := range keep {
		p = p.Masked()
		m := flow.Match{}.IPv4().IPv4DstPrefix(p)
		if p.Addr().Is6() {
			m = flow.Match{}.IPv6().IPv6DstPrefix(p)
		}
		fs = append(fs, flow.Flow{Table: Mark, Priority: prioKeep, Match: m, Goto: flow.NextTable()})
	}
	return fs
}

// PodFlows are a selected pod's flows (none when nothing is to be done:
// a remote pod whose IP is held elsewhere).
func PodFlows(l Local, p Pod) []flow.Flow {
	var m flow.Match
	switch {
	case p.Local:
		m = flow.Match{}.Field(flow.FieldPacketSource, flow.PacketSourceLocal)
	case !p.Holder.IsValid():
		m = flow.Match{}.Field(flow.FieldPacketSource, flow.PacketSourceTunnel)
	default:
		return nil
	}
	if p.IP.Is4() {
		m = m.IPv4().IPv4Src(p.IP)
	} else {
		m = m.IPv6().IPv6Src(p.IP)
	}
	var acts []flow.Action
	if p.Holder.IsValid() {
		acts = []flow.Action{flow.SetEthSrc(l.GatewayMAC), flow.SetEthDst(RemoteMAC), flow.SetTunDst(p.Holder), flow.DecTTL()}
	} else {
		if p.Meter != 0 {
			// On the holder, so every pod of the Egress, local or
			// tunnelled, shares the one meter.
			acts = append(acts, flow.ApplyMeter(p.Meter))
		}
		acts = append(acts, flow.SetPktMark(p.MarkID<<l.Mark.Offset, uint32(l.Mark.Mask())))
	}
	return []flow.Flow{{Table: Mark, Priority: prioPod, Match: m, Actions: acts, Goto: flow.NextTable(), Tag: Tag(p.Key)}}
}

// Meter is the bandwidth meter of an Egress held here: a drop band at
// rate kbit/s with a burst of burst kbit.
func Meter(id uint32, rateKbps, burstKbit uint32) flow.Meter {
	return flow.Meter{ID: id, Unit: flow.MeterKbps, Bands: []flow.MeterBand{{Rate: rateKbps, Burst: burstKbit}}}
}

// ParseBits reads a bandwidth quantity in bits ("10M", "500k", "1G", or
// plain bits) and returns it in kilobits, at least 1.
func ParseBits(s string) (uint32, error) {
	mult := uint64(1)
	t := strings.TrimSpace(s)
	switch {
	case strings.HasSuffix(t, "k"), strings.HasSuffix(t, "K"):
		mult, t = 1e3, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		mult, t = 1e6, t[:len(t)-1]
	case strings.HasSuffix(t, "G"):
		mult, t = 1e9, t[:len(t)-1]
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a bandwidth; write a positive number of bits with an optional k, M or G suffix, such as 10M", s)
	}
	k := n * mult / 1000
	if k > 1<<32-1 {
		return 0, fmt.Errorf("%q is more than a meter holds (4 Tbit)", s)
	}
	return uint32(max(k, 1)), nil
}
