package cniserver

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/types"

	"switchyard.dev/switchyard/cni/cnierr"
	"switchyard.dev/switchyard/cni/cnipb"
	"switchyard.dev/switchyard/sdk"
)

// toProto maps any failure to the CNI error the runtime will see. A code
// the plugin chose (sdk.CNIError, carried structured through the SDK, or
// the agent's own cnierr) wins; otherwise timeouts become try-again-later
// and everything else an internal error carrying the text.
func toProto(err error) *cnipb.Error {
	if err == nil {
		return nil
	}
	var se *sdk.CNIError
	if errors.As(err, &se) {
		return &cnipb.Error{Code: uint32(se.Code), Msg: se.Msg, Details: se.Details}
	}
	if e, ok := cnierr.From(err); ok {
		return &cnipb.Error{Code: uint32(e.Code), Msg: e.Msg, Details: e.Details}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &cnipb.Error{Code: uint32(types.ErrTryAgainLater), Msg: err.Error(),
			Details: "the pod network plugin did not finish in time; the runtime will retry"}
	}
	return &cnipb.Error{Code: uint32(types.ErrInternal), Msg: err.Error(),
		Details: "see the switchyard-agent log on this node for the failing step"}
}

func perr(code uint, msg, details string) *cnipb.Error {
	return &cnipb.Error{Code: uint32(code), Msg: msg, Details: details}
}
