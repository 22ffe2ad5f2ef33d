package sdkhost

// Host-side wire conversions and calls for read-back, flow-removed and the
// packet-in metadata (package sdk holds the inverse conversions).

import (
	"context"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/internal/toproto"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

func (h *hostServer) Flows(ctx context.Context, r *pb.FlowsRequest) (*pb.FlowsResponse, error) {
	fs, err := h.s.Flows(ctx, sdk.FlowFilter{Table: r.GetTable(), Tag: r.GetTag(), TagMask: r.GetTagMask()})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.FlowsResponse{Flows: make([]*pb.FlowStat, 0, len(fs))}
	for i := range fs {
		out.Flows = append(out.Flows, &pb.FlowStat{Flow: toproto.Flow(&fs[i].Flow), Packets: fs[i].Packets, Bytes: fs[i].Bytes, DurationNs: uint64(fs[i].Duration)})
	}
	return out, nil
}

func toPBCounters(cs []sdk.Counter) []*pb.Counter {
	out := make([]*pb.Counter, 0, len(cs))
	for _, c := range cs {
		out = append(out, &pb.Counter{Packets: c.Packets, Bytes: c.Bytes})
	}
	return out
}

func (h *hostServer) GroupStats(ctx context.Context, r *pb.StatsRequest) (*pb.GroupStatsResponse, error) {
	gs, err := h.s.GroupStats(ctx, r.GetIds()...)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.GroupStatsResponse{}
	for _, g := range gs {
		out.Groups = append(out.Groups, &pb.GroupStat{Id: g.ID, RefCount: g.RefCount, Packets: g.Packets, Bytes: g.Bytes, DurationNs: uint64(g.Duration), Buckets: toPBCounters(g.Buckets)})
	}
	return out, nil
}

func (h *hostServer) MeterStats(ctx context.Context, r *pb.StatsRequest) (*pb.MeterStatsResponse, error) {
	ms, err := h.s.MeterStats(ctx, r.GetIds()...)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.MeterStatsResponse{}
	for _, m := range ms {
		out.Meters = append(out.Meters, &pb.MeterStat{Id: m.ID, FlowCount: m.FlowCount, Packets: m.Packets, Bytes: m.Bytes, DurationNs: uint64(m.Duration), Bands: toPBCounters(m.Bands)})
	}
	return out, nil
}

func toPBCT(c sdk.CTInfo) *pb.CTInfo {
	out := &pb.CTInfo{State: c.State, Zone: uint32(c.Zone), Mark: c.Mark}
	if c.Label != ([16]byte{}) {
		out.Label = c.Label[:]
	}
	if t := c.Tuple; t != nil {
		out.HasTuple, out.NwSrc, out.NwDst = true, toproto.Addr(t.Src), toproto.Addr(t.Dst)
		out.NwProto, out.TpSrc, out.TpDst = uint32(t.Proto), uint32(t.SrcPort), uint32(t.DstPort)
	}
	return out
}

func toPBFields(fs map[string]uint32) []*pb.FieldValue {
	out := make([]*pb.FieldValue, 0, len(fs))
	for n, v := range fs {
		out = append(out, &pb.FieldValue{Field: &pb.Field{Name: n}, Value: v})
	}
	return out
}

// FlowRemoved tells the plugin the switch removed one of its flows.
func (p *Plugin) FlowRemoved(ctx context.Context, r sdk.FlowRemovedRequest) error {
	_, err := p.wc.Feature.FlowRemoved(ctx, &pb.FlowRemovedRequest{Flow: toproto.Flow(&r.Flow), Reason: uint32(r.Reason),
		Packets: r.Packets, Bytes: r.Bytes, DurationNs: uint64(r.Duration)})
	return fromStatus(err)
}
