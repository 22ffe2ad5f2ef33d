package sdkhost

// Conversions between SDK author types and wire messages for the host side
// of the wire; the plugin side holds the inverse ones (package sdk). Each
// function is pure.

import (
	"fmt"
	"net/netip"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/internal/fromproto"
	"switchyard.dev/switchyard/sdk/internal/toproto"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

func toPBAssignment(a sdk.Assignment) *pb.Assignment {
	out := &pb.Assignment{Tables: map[string]uint32{}, Fields: map[string]*pb.Bits{}, CookiePrefix: uint32(a.CookiePrefix), Round: uint32(a.Round)}
	for k, v := range a.Tables {
		out.Tables[k] = uint32(v)
	}
	for k, v := range a.Fields {
		out.Fields[k] = toproto.Bits(v)
	}
	if len(a.Grants) > 0 {
		out.Grants = map[string]*pb.Grant{}
	}
	for k, g := range a.Grants {
		out.Grants[k] = &pb.Grant{Kind: uint32(g.Kind), Owner: g.Owner, Value: g.Value, Offset: uint32(g.Offset), Width: uint32(g.Width)}
	}
	return out
}

func toPBNodeFacts(n sdk.NodeFacts) *pb.Facts {
	return &pb.Facts{
		Name: n.Name, PodCidrs: toproto.Prefixes(n.PodCIDRs), NodeIps: toproto.Addrs(n.NodeIPs),
		GatewayIp: toproto.Addr(n.GatewayIP), GatewayMac: n.GatewayMAC, Mtu: uint32(n.MTU),
		Bridge: n.Bridge, DatapathType: n.DatapathType, UserspaceTso: n.UserspaceTSO,
		PodMtu: uint32(max(n.PodMTU, 0)), ExternalIps: toproto.Addrs(n.ExternalIPs), Uplink: n.Uplink,
	}
}

func toPBCNIArgs(a sdk.CNIArgs) *pb.CNIRequest {
	return &pb.CNIRequest{
		ContainerId: a.ContainerID, Netns: a.Netns, IfName: a.IfName,
		PodNamespace: a.PodNamespace, PodName: a.PodName, PodUid: a.PodUID, NetConf: a.NetConf, Mtu: uint32(a.MTU),
	}
}

func toPBPodInterface(p sdk.PodInterface) *pb.PodInterface {
	return &pb.PodInterface{
		PodNamespace: p.PodNamespace, PodName: p.PodName, ContainerId: p.ContainerID,
		IfName: p.IfName, HostIfName: p.HostIfName, Ofport: p.OFPort, Mac: p.MAC, Ips: toproto.Addrs(p.IPs),
	}
}

func toPBPodInterfaceEvent(r sdk.PodInterfaceEventRequest) *pb.PodInterfaceEventRequest {
	return &pb.PodInterfaceEventRequest{Kind: uint32(r.Kind), Interface: toPBPodInterface(r.Interface)}
}

func toPBPacketIn(r sdk.PacketInRequest) *pb.PacketInRequest {
	return &pb.PacketInRequest{Table: r.Table, TableId: uint32(r.TableID), Tag: r.Tag, InPort: r.InPort, Userdata: r.Userdata, Data: r.Data,
		Fields: toPBFields(r.Fields), Ct: toPBCT(r.CT)}
}

func toPBNodeEvent(r sdk.NodeEventRequest) *pb.NodeEventRequest {
	return &pb.NodeEventRequest{Kind: uint32(r.Kind), Node: &pb.NodeInfo{Name: r.Node.Name, NodeIps: toproto.Addrs(r.Node.NodeIPs), PodCidrs: toproto.Prefixes(r.Node.PodCIDRs)}}
}

func toPBPort(p sdk.Port) *pb.Port {
	return &pb.Port{Name: p.Name, Ofport: p.OFPort, OfportRequest: p.OFPortRequest, Mac: p.MAC, Owner: p.Owner, Exported: p.Exported}
}

func fromPBTable(t *pb.Table) (sdk.Table, error) {
	out := sdk.Table{Name: t.GetName(), Pipeline: flow.Pipeline(t.GetPipeline()), Stage: flow.Stage(t.GetStage()), Miss: sdk.MissAction(t.GetMiss()), Exported: t.GetExported(),
		After: t.GetAfter(), Before: t.GetBefore()}
	if t.GetPipeline() > 255 || !out.Pipeline.Valid() {
		return out, fmt.Errorf("table %q: unknown pipeline %d", t.GetName(), t.GetPipeline())
	}
	if t.GetStage() > 255 || !out.Stage.Valid() {
		return out, fmt.Errorf("table %q: unknown stage %d", t.GetName(), t.GetStage())
	}
	if t.GetMiss() > uint32(sdk.MissController) {
		return out, fmt.Errorf("table %q: unknown miss action %d", t.GetName(), t.GetMiss())
	}
	return out, nil
}

func fromPBDescribeResponse(r *pb.DescribeResponse) (*sdk.DescribeResponse, []sdk.Capability, error) {
	out := &sdk.DescribeResponse{Name: r.GetName(), Version: r.GetVersion(), EncapOverhead: int(min(r.GetEncapOverhead(), 65535))}
	for _, t := range r.GetTables() {
		tt, err := fromPBTable(t)
		if err != nil {
			return nil, nil, err
		}
		out.Tables = append(out.Tables, tt)
	}
	for _, f := range r.GetFields() {
		out.Fields = append(out.Fields, fromproto.Field(f))
	}
	for _, rs := range r.GetResources() {
		if rs.GetKind() == 0 || rs.GetKind() > uint32(sdk.ResourceMaxKind) || rs.GetWidth() > 64 {
			return nil, nil, fmt.Errorf("resource %q: unknown kind %d or width %d over 64", rs.GetName(), rs.GetKind(), rs.GetWidth())
		}
		out.Resources = append(out.Resources, sdk.Resource{Kind: sdk.ResourceKind(rs.GetKind()), Name: rs.GetName(), Width: uint8(rs.GetWidth()), Exported: rs.GetExported()})
	}
	var caps []sdk.Capability
	for _, c := range r.GetCapabilities() {
		caps = append(caps, sdk.Capability(c))
	}
	return out, caps, nil
}

func fromPBPodInterface(p *pb.PodInterface) (sdk.PodInterface, error) {
	out := sdk.PodInterface{
		PodNamespace: p.GetPodNamespace(), PodName: p.GetPodName(), ContainerID: p.GetContainerId(),
		IfName: p.GetIfName(), HostIfName: p.GetHostIfName(), OFPort: p.GetOfport(), MAC: fromproto.MAC(p.GetMac()),
	}
	var err error
	if out.IPs, err = fromproto.Addrs(p.GetIps()); err != nil {
		return out, fmt.Errorf("pod interface IP: %w", err)
	}
	return out, nil
}

func fromPBCNIAddResponse(r *pb.CNIAddResponse) (*sdk.CNIAddResponse, error) {
	out := &sdk.CNIAddResponse{MTU: int(r.GetMtu())}
	var err error
	if out.Interface, err = fromPBPodInterface(r.GetInterface()); err != nil {
		return nil, err
	}
	for _, ip := range r.GetIps() {
		p, err := netip.ParsePrefix(ip.GetAddress())
		if err != nil {
			return nil, fmt.Errorf("CNI result address: %w", err)
		}
		gw, err := fromproto.Addr(ip.GetGateway())
		if err != nil {
			return nil, fmt.Errorf("CNI result gateway: %w", err)
		}
		out.IPs = append(out.IPs, sdk.IPConfig{Address: p, Gateway: gw})
	}
	for _, rt := range r.GetRoutes() {
		d, err := netip.ParsePrefix(rt.GetDst())
		if err != nil {
			return nil, fmt.Errorf("CNI result route: %w", err)
		}
		gw, err := fromproto.Addr(rt.GetGw())
		if err != nil {
			return nil, fmt.Errorf("CNI result route gateway: %w", err)
		}
		out.Routes = append(out.Routes, sdk.Route{Dst: d, GW: gw})
	}
	return out, nil
}

func fromPBPortRequest(r *pb.PortRequest) sdk.PortRequest {
	return sdk.PortRequest{Name: r.GetName(), Type: r.GetType(), Options: r.GetOptions(), ExternalIDs: r.GetExternalIds(), OFPort: r.GetOfport(), Exported: r.GetExported(), NoWait: r.GetNoWait()}
}

func fromPBPacketOut(p *pb.PacketOutRequest) sdk.PacketOut {
	return sdk.PacketOut{InPort: p.GetInPort(), Actions: fromproto.Actions(p.GetActions()), Resubmit: p.GetResubmit(), Data: p.GetData(), ResumeTable: p.GetResumeTable()}
}
