package sdkhost

import (
	"context"
	"fmt"
	"time"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/internal/fastwire"
	"switchyard.dev/switchyard/sdk/internal/wire"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

// HostService is what the host implements for one plugin: every call comes
// from that plugin. It mirrors sdk.Host. Errors should wrap the sdk
// sentinels (sdk.ErrConflict, ...) so the plugin can test them with errors.Is.
type HostService interface {
	Apply(ctx context.Context, b *flow.Batch) error
	CreatePort(ctx context.Context, req sdk.PortRequest) (sdk.Port, error)
	WaitPort(ctx context.Context, name string) (sdk.Port, error)
	DeletePort(ctx context.Context, name string) error
	Port(ctx context.Context, name string) (sdk.Port, error)
	PacketOut(ctx context.Context, p sdk.PacketOut) error
	NodeFacts(ctx context.Context) (sdk.NodeFacts, error)
	Synced(ctx context.Context) error
	// Read-back: only the calling plugin's flows, groups and meters.
	Flows(ctx context.Context, f sdk.FlowFilter) ([]sdk.FlowStats, error)
	GroupStats(ctx context.Context, ids ...uint32) ([]sdk.GroupStats, error)
	MeterStats(ctx context.Context, ids ...uint32) ([]sdk.MeterStats, error)
	// Token returns the agent's current cluster token and when it expires
	// (zero if unknown); an empty token means the host has none.
	Token(ctx context.Context) (string, time.Time, error)
}

// hostServer adapts a HostService to the wire.
type hostServer struct {
	pb.UnimplementedHostServer
	s HostService
}

var _ pb.HostServer = (*hostServer)(nil)

func toStatus(err error) error { return wire.ToStatus(err, sdk.Sentinels()) }

func (h *hostServer) Apply(ctx context.Context, r *pb.RawBatch) (*pb.ApplyResponse, error) {
	b, err := fastwire.Decode(r.GetBatch())
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: %v", sdk.ErrInvalid, err))
	}
	if err := h.s.Apply(ctx, b); err != nil {
		return nil, toStatus(err)
	}
	return &pb.ApplyResponse{}, nil
}

func (h *hostServer) CreatePort(ctx context.Context, r *pb.PortRequest) (*pb.Port, error) {
	p, err := h.s.CreatePort(ctx, fromPBPortRequest(r))
	if err != nil {
		return nil, toStatus(err)
	}
	return toPBPort(p), nil
}

func (h *hostServer) WaitPort(ctx context.Context, r *pb.PortName) (*pb.Port, error) {
	p, err := h.s.WaitPort(ctx, r.GetName())
	if err != nil {
		return nil, toStatus(err)
	}
	return toPBPort(p), nil
}

func (h *hostServer) DeletePort(ctx context.Context, r *pb.PortName) (*pb.Empty, error) {
	if err := h.s.DeletePort(ctx, r.GetName()); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

func (h *hostServer) GetPort(ctx context.Context, r *pb.PortName) (*pb.Port, error) {
	p, err := h.s.Port(ctx, r.GetName())
	if err != nil {
		return nil, toStatus(err)
	}
	return toPBPort(p), nil
}

func (h *hostServer) PacketOut(ctx context.Context, r *pb.PacketOutRequest) (*pb.Empty, error) {
	if err := h.s.PacketOut(ctx, fromPBPacketOut(r)); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

func (h *hostServer) NodeFacts(ctx context.Context, _ *pb.Empty) (*pb.Facts, error) {
	f, err := h.s.NodeFacts(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return toPBNodeFacts(f), nil
}

func (h *hostServer) Synced(ctx context.Context, _ *pb.Empty) (*pb.Empty, error) {
	if err := h.s.Synced(ctx); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}

func (h *hostServer) Token(ctx context.Context, _ *pb.Empty) (*pb.TokenReply, error) {
	t, exp, err := h.s.Token(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.TokenReply{Token: t}
	if !exp.IsZero() {
		out.ExpiryUnix = exp.Unix()
	}
	return out, nil
}
