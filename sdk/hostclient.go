package sdk

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/internal/fastwire"
	"switchyard.dev/switchyard/sdk/internal/wire"
	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

// hostClient is the Host handle a plugin gets: each method converts, calls
// the host over the broker connection and restores the host's error.
type hostClient struct {
	c      pb.HostClient
	logger *slog.Logger
}

var _ Host = (*hostClient)(nil)

func fromStatus(err error) error { return wire.FromStatus(err, Sentinels()) }

func (h *hostClient) Apply(ctx context.Context, b *flow.Batch) error {
	raw, err := fastwire.Append(nil, b)
	if err != nil {
		return fmt.Errorf("%w: encode batch: %v", ErrInvalid, err)
	}
	_, err = h.c.Apply(ctx, &pb.RawBatch{Batch: raw})
	return fromStatus(err)
}

func (h *hostClient) CreatePort(ctx context.Context, req PortRequest) (Port, error) {
	p, err := h.c.CreatePort(ctx, toPBPortRequest(req))
	if err != nil {
		return Port{}, fromStatus(err)
	}
	return fromPBPort(p), nil
}

func (h *hostClient) WaitPort(ctx context.Context, name string) (Port, error) {
	p, err := h.c.WaitPort(ctx, &pb.PortName{Name: name})
	if err != nil {
		return Port{}, fromStatus(err)
	}
	return fromPBPort(p), nil
}

func (h *hostClient) DeletePort(ctx context.Context, name string) error {
	_, err := h.c.DeletePort(ctx, &pb.PortName{Name: name})
	return fromStatus(err)
}

func (h *hostClient) Port(ctx context.Context, name string) (Port, error) {
	p, err := h.c.GetPort(ctx, &pb.PortName{Name: name})
	if err != nil {
		return Port{}, fromStatus(err)
	}
	return fromPBPort(p), nil
}

func (h *hostClient) PacketOut(ctx context.Context, p PacketOut) error {
	_, err := h.c.PacketOut(ctx, toPBPacketOut(p))
	return fromStatus(err)
}

func (h *hostClient) NodeFacts(ctx context.Context) (NodeFacts, error) {
	f, err := h.c.NodeFacts(ctx, &pb.Empty{})
	if err != nil {
		return NodeFacts{}, fromStatus(err)
	}
	return fromPBNodeFacts(f)
}

func (h *hostClient) Synced(ctx context.Context) error {
	_, err := h.c.Synced(ctx, &pb.Empty{})
	return fromStatus(err)
}

func (h *hostClient) Logger() *slog.Logger { return h.logger }

// token asks the host for the agent's current cluster token.
func (h *hostClient) token(ctx context.Context) (string, time.Time, error) {
	r, err := h.c.Token(ctx, &pb.Empty{})
	if err != nil {
		return "", time.Time{}, fromStatus(err)
	}
	if r.GetToken() == "" {
		return "", time.Time{}, ErrNoToken
	}
	var exp time.Time
	if r.GetExpiryUnix() > 0 {
		exp = time.Unix(r.GetExpiryUnix(), 0)
	}
	return r.GetToken(), exp, nil
}
