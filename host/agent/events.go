package agent

import (
	"context"
	"slices"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/sdkhost"
)

// running returns the current process of every plugin with capability c,
// in config order.
func (a *Agent) running(c sdk.Capability) []struct {
	name string
	p    *sdkhost.Plugin
} {
	a.pmu.Lock()
	order := slices.Clone(a.order)
	rs := make([]*runner, 0, len(order))
	for _, n := range order {
		if r := a.plugins[n]; r != nil {
			rs = append(rs, r)
		}
	}
	a.pmu.Unlock()
	var out []struct {
		name string
		p    *sdkhost.Plugin
	}
	for _, r := range rs {
		r.mu.Lock()
		if r.proc != nil && (r.state == StateRunning || r.state == StateSynced) && slices.Contains(r.caps, c) {
			out = append(out, struct {
				name string
				p    *sdkhost.Plugin
			}{r.spec.Name, r.proc})
		}
		r.mu.Unlock()
	}
	return out
}

// PodInterfaceEvent tells every subscribed plugin, in config order. A
// subscriber's failure is logged, not returned: one plugin must not block
// the others' view of the pods.
func (a *Agent) PodInterfaceEvent(ctx context.Context, req sdk.PodInterfaceEventRequest) {
	for _, s := range a.running(sdk.CapPodInterface) {
		if err := s.p.PodInterfaceEvent(ctx, req); err != nil {
			a.log.Warn("pod interface event not taken", "plugin", s.name, "pod", req.Interface.PodNamespace+"/"+req.Interface.PodName, "error", err)
		}
	}
}

// NodeEvent tells every plugin subscribed to node events, in config order.
func (a *Agent) NodeEvent(ctx context.Context, req sdk.NodeEventRequest) {
	for _, s := range a.running(sdk.CapNodeEvents) {
		if err := s.p.NodeEvent(ctx, req); err != nil {
			a.log.Warn("node event not taken", "plugin", s.name, "node", req.Node.Name, "error", err)
		}
	}
}
