package sdkhost

import (
	"context"

	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

// PortLabeler is implemented by a HostService that can change a port's
// external_ids (sdk.PortLabeler); without it the call is refused as
// unimplemented.
type PortLabeler interface {
	LabelPort(ctx context.Context, name string, externalIDs map[string]string) error
}

func (h *hostServer) LabelPort(ctx context.Context, r *pb.LabelPortRequest) (*pb.Empty, error) {
	l, ok := h.s.(PortLabeler)
	if !ok {
		return h.UnimplementedHostServer.LabelPort(ctx, r)
	}
	if err := l.LabelPort(ctx, r.GetName(), r.GetExternalIds()); err != nil {
		return nil, toStatus(err)
	}
	return &pb.Empty{}, nil
}
