package sdk

import (
	"context"
	"maps"

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

// Relabel returns cur with set applied as LabelPort applies it: each key
// set to its value, and a key whose value is empty removed. cur itself is
// left as it is.
func Relabel(cur, set map[string]string) map[string]string {
	out := maps.Clone(cur)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range set {
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

var _ PortLabeler = (*hostClient)(nil)

func (h *hostClient) LabelPort(ctx context.Context, name string, externalIDs map[string]string) error {
	_, err := h.c.LabelPort(ctx, &pb.LabelPortRequest{Name: name, ExternalIds: externalIDs})
	return fromStatus(err)
}
