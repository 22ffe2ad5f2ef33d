package sdk

// Conversions between the author types of this package and wire messages,
// for the plugin side of the wire (sdkhost holds the inverse ones). Each
// function is pure. The flow model converts in internal/toproto and
// internal/fromproto, shared by both sides.

import (
	"fmt"

	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/internal/fromproto"
	"switchyard.dev/switchyard/sdk/internal/toproto"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

func toPBTable(t Table) *pb.Table {
	return &pb.Table{Name: t.Name, Pipeline: uint32(t.Pipeline), Stage: uint32(t.Stage), Miss: uint32(t.Miss), Exported: t.Exported, After: t.After, Before: t.Before}
}

func toPBDescribeResponse(r *DescribeResponse, caps []Capability) *pb.DescribeResponse {
	out := &pb.DescribeResponse{Name: r.Name, Version: r.Version, EncapOverhead: uint32(max(r.EncapOverhead, 0))}
	for _, t := range r.Tables {
		out.Tables = append(out.Tables, toPBTable(t))
	}
	for _, f := range r.Fields {
		out.Fields = append(out.Fields, toproto.Field(f))
	}
	for _, c := range caps {
		out.Capabilities = append(out.Capabilities, string(c))
	}
	for _, rs := range r.Resources {
		out.Resources = append(out.Resources, &pb.Resource{Kind: uint32(rs.Kind), Name: rs.Name, Width: uint32(rs.Width), Exported: rs.Exported})
	}
	return out
}

func toPBPodInterface(p PodInterface) *pb.PodInterface {
	return &pb.PodInterface{
		PodNamespace: p.PodNamespace, PodName: p.PodName, ContainerId: p.ContainerID,
		IfName: p.IfName, HostIfName: p.HostIfName, Ofport: p.OFPort, Mac: p.MAC, Ips: toproto.Addrs(p.IPs),
	}
}

func toPBCNIAddResponse(r *CNIAddResponse) *pb.CNIAddResponse {
	out := &pb.CNIAddResponse{Interface: toPBPodInterface(r.Interface), Mtu: uint32(r.MTU)}
	for _, ip := range r.IPs {
		out.Ips = append(out.Ips, &pb.IPConfig{Address: ip.Address.String(), Gateway: toproto.Addr(ip.Gateway)})
	}
	for _, rt := range r.Routes {
		out.Routes = append(out.Routes, &pb.Route{Dst: rt.Dst.String(), Gw: toproto.Addr(rt.GW)})
	}
	return out
}

func toPBPortRequest(r PortRequest) *pb.PortRequest {
	return &pb.PortRequest{Name: r.Name, Type: r.Type, Options: r.Options, ExternalIds: r.ExternalIDs, Ofport: r.OFPort, Exported: r.Exported, NoWait: r.NoWait}
}

func toPBPacketOut(p PacketOut) *pb.PacketOutRequest {
	return &pb.PacketOutRequest{InPort: p.InPort, Actions: toproto.Actions(p.Actions), Resubmit: p.Resubmit, Data: p.Data, ResumeTable: p.ResumeTable}
}

func fromPBAssignment(a *pb.Assignment) Assignment {
	out := Assignment{Tables: map[string]uint8{}, Fields: map[string]flow.Bits{}, CookiePrefix: uint16(a.GetCookiePrefix()), Round: uint16(a.GetRound())}
	for k, v := range a.GetTables() {
		out.Tables[k] = uint8(v)
	}
	for k, v := range a.GetFields() {
		out.Fields[k] = fromproto.Bits(v)
	}
	if len(a.GetGrants()) > 0 {
		out.Grants = map[string]Grant{}
	}
	for k, g := range a.GetGrants() {
		out.Grants[k] = Grant{Kind: ResourceKind(g.GetKind()), Owner: g.GetOwner(), Value: g.GetValue(), Offset: uint8(g.GetOffset()), Width: uint8(g.GetWidth())}
	}
	return out
}

func fromPBNodeFacts(n *pb.Facts) (NodeFacts, error) {
	out := NodeFacts{Name: n.GetName(), GatewayMAC: fromproto.MAC(n.GetGatewayMac()), MTU: int(n.GetMtu()), PodMTU: int(n.GetPodMtu()),
		Uplink: n.GetUplink(), Bridge: n.GetBridge(), DatapathType: n.GetDatapathType(), UserspaceTSO: n.GetUserspaceTso()}
	var err error
	if out.ExternalIPs, err = fromproto.Addrs(n.GetExternalIps()); err != nil {
		return out, fmt.Errorf("node facts external IP: %w", err)
	}
	if out.PodCIDRs, err = fromproto.Prefixes(n.GetPodCidrs()); err != nil {
		return out, fmt.Errorf("node facts pod CIDR: %w", err)
	}
	if out.NodeIPs, err = fromproto.Addrs(n.GetNodeIps()); err != nil {
		return out, fmt.Errorf("node facts node IP: %w", err)
	}
	if out.GatewayIP, err = fromproto.Addr(n.GetGatewayIp()); err != nil {
		return out, fmt.Errorf("node facts gateway IP: %w", err)
	}
	return out, nil
}

func fromPBCNIArgs(r *pb.CNIRequest) CNIArgs {
	return CNIArgs{
		ContainerID: r.GetContainerId(), Netns: r.GetNetns(), IfName: r.GetIfName(),
		PodNamespace: r.GetPodNamespace(), PodName: r.GetPodName(), PodUID: r.GetPodUid(), NetConf: r.GetNetConf(),
		MTU: int(r.GetMtu()),
	}
}

func fromPBPodInterface(p *pb.PodInterface) (PodInterface, error) {
	out := PodInterface{
		PodNamespace: p.GetPodNamespace(), PodName: p.GetPodName(), ContainerID: p.GetContainerId(),
		IfName: p.GetIfName(), HostIfName: p.GetHostIfName(), OFPort: p.GetOfport(), MAC: fromproto.MAC(p.GetMac()),
	}
	var err error
	if out.IPs, err = fromproto.Addrs(p.GetIps()); err != nil {
		return out, fmt.Errorf("pod interface IP: %w", err)
	}
	return out, nil
}

func fromPBPodInterfaceEvent(r *pb.PodInterfaceEventRequest) (PodInterfaceEventRequest, error) {
	pi, err := fromPBPodInterface(r.GetInterface())
	return PodInterfaceEventRequest{Kind: PodInterfaceEventKind(r.GetKind()), Interface: pi}, err
}

func fromPBPacketIn(r *pb.PacketInRequest) PacketInRequest {
	return PacketInRequest{Table: r.GetTable(), TableID: uint8(r.GetTableId()), Tag: r.GetTag(), InPort: r.GetInPort(), Userdata: r.GetUserdata(), Data: r.GetData(),
		Fields: fromPBFields(r.GetFields()), CT: fromPBCT(r.GetCt())}
}

func fromPBNodeEvent(r *pb.NodeEventRequest) (NodeEventRequest, error) {
	out := NodeEventRequest{Kind: NodeEventKind(r.GetKind()), Node: NodeInfo{Name: r.GetNode().GetName()}}
	var err error
	if out.Node.NodeIPs, err = fromproto.Addrs(r.GetNode().GetNodeIps()); err != nil {
		return out, fmt.Errorf("node event node IP: %w", err)
	}
	if out.Node.PodCIDRs, err = fromproto.Prefixes(r.GetNode().GetPodCidrs()); err != nil {
		return out, fmt.Errorf("node event pod CIDR: %w", err)
	}
	return out, nil
}

func fromPBPort(p *pb.Port) Port {
	return Port{Name: p.GetName(), OFPort: p.GetOfport(), OFPortRequest: p.GetOfportRequest(), MAC: fromproto.MAC(p.GetMac()), Owner: p.GetOwner(), Exported: p.GetExported()}
}

func fromPBEndpoint(e *pb.Endpoint) Endpoint {
	return Endpoint{URL: e.GetUrl(), CAPEM: e.GetCaPem()}
}

func fromPBNodeFactsChanged(r *pb.NodeFactsChangedRequest) (NodeFactsChangedRequest, error) {
	var out NodeFactsChangedRequest
	var err error
	if out.Old, err = fromPBNodeFacts(r.GetOld()); err != nil {
		return out, err
	}
	out.New, err = fromPBNodeFacts(r.GetNew())
	return out, err
}
