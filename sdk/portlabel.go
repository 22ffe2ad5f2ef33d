package sdk

import (
	"context"

	pb "switchyard.dev/switchyard/sdk/internal/wirepb"
)

// PortLabeler is implemented by the Host of an agent that can change the
// external_ids of a port after it was created, for operators who look a
// port up in OVSDB: podnet names the pod on a port it made before the pod
// existed (a warm port). Assert it on StartRequest.Host:
//
//	if l, ok := req.Host.(sdk.PortLabeler); ok { ... }
type PortLabeler interface {
	// LabelPort sets externalIDs on the port name and its interface,
	// keeping the other keys; an empty value removes its key. Only the
	// port's creator may (ErrNotOwner), and keys the host keeps for
	// itself (switchyard-owner, switchyard-exported) are refused
	// (ErrInvalid).
	LabelPort(ctx context.Context, name string, externalIDs map[string]string) error
}

var _ PortLabeler = (*hostClient)(nil)

func (h *hostClient) LabelPort(ctx context.Context, name string, externalIDs map[string]string) error {
	_, err := h.c.LabelPort(ctx, &pb.LabelPortRequest{Name: name, ExternalIds: externalIDs})
	return fromStatus(err)
}
