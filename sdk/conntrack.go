package sdk

import (
	"context"
	"net/netip"

	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

// ConntrackFlusher is implemented by the Host of an agent that can remove
// conntrack entries: a plugin that NATs (a Service proxy whose endpoint
// went away) asserts it on StartRequest.Host:
//
//	if f, ok := req.Host.(sdk.ConntrackFlusher); ok { ... }
//
// Only entries of a ct zone granted to the plugin (a ResourceCTZone) can
// be removed; the shared zone 0 cannot.
type ConntrackFlusher interface {
	FlushConntrack(ctx context.Context, f ConntrackFilter) error
}

// ConntrackFilter says which entries of Zone go: those of Protocol (0:
// any) whose original direction matches Orig and whose reply direction
// matches Reply. A zero field matches anything, so
// Reply{Src: endpoint, SrcPort: 53} removes every connection answered by
// that endpoint's port 53, and an empty filter the whole zone.
type ConntrackFilter struct {
	Zone     uint16
	Protocol uint8
	Orig     ConntrackTuple
	Reply    ConntrackTuple
}

// ConntrackTuple is one direction of a connection; zero fields match
// anything.
type ConntrackTuple struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

var _ ConntrackFlusher = (*hostClient)(nil)

func (h *hostClient) FlushConntrack(ctx context.Context, f ConntrackFilter) error {
	_, err := h.c.FlushConntrack(ctx, toPBConntrackFilter(f))
	return fromStatus(err)
}

// toPBConntrackFilter is a filter's wire form (sdkhost reads it back).
func toPBConntrackFilter(f ConntrackFilter) *pb.ConntrackFlushRequest {
	t := func(t ConntrackTuple) *pb.ConntrackTuple {
		return &pb.ConntrackTuple{Src: addrBytes(t.Src), Dst: addrBytes(t.Dst), SrcPort: uint32(t.SrcPort), DstPort: uint32(t.DstPort)}
	}
	return &pb.ConntrackFlushRequest{Zone: uint32(f.Zone), Protocol: uint32(f.Protocol), Orig: t(f.Orig), Reply: t(f.Reply)}
}

func addrBytes(a netip.Addr) []byte {
	if !a.IsValid() {
		return nil
	}
	return a.AsSlice()
}
