package sdk

// Plugin-side wire conversions and calls for read-back, flow-removed and
// the packet-in metadata (sdkhost holds the inverse conversions).

import (
	"context"
	"net/netip"
	"time"

	"switchyard.dev/switchyard/sdk/internal/fromproto"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

func (h *hostClient) Flows(ctx context.Context, f FlowFilter) ([]FlowStats, error) {
	r, err := h.c.Flows(ctx, &pb.FlowsRequest{Table: f.Table, Tag: f.Tag, TagMask: f.TagMask})
	if err != nil {
		return nil, fromStatus(err)
	}
	out := make([]FlowStats, 0, len(r.GetFlows()))
	for _, s := range r.GetFlows() {
		out = append(out, FlowStats{Flow: *fromproto.Flow(s.GetFlow()), Packets: s.GetPackets(), Bytes: s.GetBytes(), Duration: time.Duration(s.GetDurationNs())})
	}
	return out, nil
}

func fromPBCounters(cs []*pb.Counter) []Counter {
	var out []Counter
	for _, c := range cs {
		out = append(out, Counter{Packets: c.GetPackets(), Bytes: c.GetBytes()})
	}
	return out
}

func (h *hostClient) GroupStats(ctx context.Context, ids ...uint32) ([]GroupStats, error) {
	r, err := h.c.GroupStats(ctx, &pb.StatsRequest{Ids: ids})
	if err != nil {
		return nil, fromStatus(err)
	}
	var out []GroupStats
	for _, g := range r.GetGroups() {
		out = append(out, GroupStats{ID: g.GetId(), RefCount: g.GetRefCount(), Packets: g.GetPackets(), Bytes: g.GetBytes(),
			Duration: time.Duration(g.GetDurationNs()), Buckets: fromPBCounters(g.GetBuckets())})
	}
	return out, nil
}

func (h *hostClient) MeterStats(ctx context.Context, ids ...uint32) ([]MeterStats, error) {
	r, err := h.c.MeterStats(ctx, &pb.StatsRequest{Ids: ids})
	if err != nil {
		return nil, fromStatus(err)
	}
	var out []MeterStats
	for _, m := range r.GetMeters() {
		out = append(out, MeterStats{ID: m.GetId(), FlowCount: m.GetFlowCount(), Packets: m.GetPackets(), Bytes: m.GetBytes(),
			Duration: time.Duration(m.GetDurationNs()), Bands: fromPBCounters(m.GetBands())})
	}
	return out, nil
}

func fromPBCT(c *pb.CTInfo) CTInfo {
	if c == nil {
		return CTInfo{}
	}
	out := CTInfo{State: c.GetState(), Zone: uint16(c.GetZone()), Mark: c.GetMark()}
	copy(out.Label[:], c.GetLabel())
	if c.GetHasTuple() {
		src, _ := netip.ParseAddr(c.GetNwSrc())
		dst, _ := netip.ParseAddr(c.GetNwDst())
		out.Tuple = &CTTuple{Src: src, Dst: dst, Proto: uint8(c.GetNwProto()), SrcPort: uint16(c.GetTpSrc()), DstPort: uint16(c.GetTpDst())}
	}
	return out
}

func fromPBFields(fs []*pb.FieldValue) map[string]uint32 {
	if len(fs) == 0 {
		return nil
	}
	out := make(map[string]uint32, len(fs))
	for _, f := range fs {
		out[f.GetField().GetName()] = f.GetValue()
	}
	return out
}

func (s *featureServer) FlowRemoved(ctx context.Context, req *pb.FlowRemovedRequest) (*pb.Empty, error) {
	h, ok := s.f.(FlowRemovedHandler)
	if !ok {
		return nil, unimplemented(CapFlowRemoved)
	}
	r := FlowRemovedRequest{Reason: FlowRemovedReason(min(req.GetReason(), 255)), Packets: req.GetPackets(), Bytes: req.GetBytes(), Duration: time.Duration(req.GetDurationNs())}
	if f := req.GetFlow(); f != nil {
		r.Flow = *fromproto.Flow(f)
	}
	if err := h.FlowRemoved(ctx, r, &FlowRemovedResponse{}); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}
