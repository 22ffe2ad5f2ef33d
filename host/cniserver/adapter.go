package cniserver

import (
	"context"

	"switchyard.dev/switchyard/sdk"
)

// PluginCNI is the host-side handle of a plugin process with the CNI
// capability (sdkhost.Plugin has this shape).
type PluginCNI interface {
	CNIAdd(ctx context.Context, a sdk.CNIArgs) (*sdk.CNIAddResponse, error)
	CNIDel(ctx context.Context, a sdk.CNIArgs) error
	CNICheck(ctx context.Context, a sdk.CNIArgs) error
}

// FromPlugin adapts a plugin handle to the sdk.CNIHandler the server
// dispatches to, so a Resolver can be as small as
//
//	func() (sdk.CNIHandler, bool) { p := supervisor.CNIPlugin(); return cniserver.FromPlugin(p), p != nil }
func FromPlugin(p PluginCNI) sdk.CNIHandler {
	if p == nil {
		return nil
	}
	return pluginHandler{p}
}

type pluginHandler struct{ p PluginCNI }

func (h pluginHandler) CNIAdd(ctx context.Context, req sdk.CNIAddRequest, resp *sdk.CNIAddResponse) error {
	r, err := h.p.CNIAdd(ctx, req.Args)
	if err != nil {
		return err
	}
	*resp = *r
	return nil
}

func (h pluginHandler) CNIDel(ctx context.Context, req sdk.CNIDelRequest, _ *sdk.CNIDelResponse) error {
	return h.p.CNIDel(ctx, req.Args)
}

func (h pluginHandler) CNICheck(ctx context.Context, req sdk.CNICheckRequest, _ *sdk.CNICheckResponse) error {
	return h.p.CNICheck(ctx, req.Args)
}
