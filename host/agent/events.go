package agent

import (
	"context"
	"maps"
	"slices"
	"strings"

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
		if r.proc != nil && r.started && slices.Contains(r.caps, c) {
			out = append(out, struct {
				name string
				p    *sdkhost.Plugin
			}{r.spec.Name, r.proc})
		}
		r.mu.Unlock()
	}
	return out
}

// PodInterfaceEvent records the pod interface and tells every subscribed
// plugin, in config order. A subscriber's failure is logged, not returned:
// one plugin must not block the others' view of the pods.
func (a *Agent) PodInterfaceEvent(ctx context.Context, req sdk.PodInterfaceEventRequest) {
	a.evmu.RLock()
	defer a.evmu.RUnlock()
	key := req.Interface.ContainerID + "/" + req.Interface.IfName
	a.known.Lock()
	if req.Kind == sdk.PodInterfaceDeleted {
		delete(a.known.pods, key)
	} else {
		a.known.pods[key] = req.Interface
	}
	a.known.Unlock()
	for _, s := range a.running(sdk.CapPodInterface) {
		if err := s.p.PodInterfaceEvent(ctx, req); err != nil {
			a.log.Warn("pod interface event not taken", "plugin", s.name, "pod", req.Interface.PodNamespace+"/"+req.Interface.PodName, "error", err)
		}
	}
}

// NodeEvent records the node and tells every plugin subscribed to node
// events, in config order.
func (a *Agent) NodeEvent(ctx context.Context, req sdk.NodeEventRequest) {
	a.evmu.RLock()
	defer a.evmu.RUnlock()
	a.known.Lock()
	if req.Kind == sdk.NodeDeleted {
		delete(a.known.nodes, req.Node.Name)
	} else {
		a.known.nodes[req.Node.Name] = req.Node
	}
	a.known.Unlock()
	for _, s := range a.running(sdk.CapNodeEvents) {
		if err := s.p.NodeEvent(ctx, req); err != nil {
			a.log.Warn("node event not taken", "plugin", s.name, "node", req.Node.Name, "error", err)
		}
	}
}

// admit opens a plugin incarnation whose Start returned to calls and
// events, after giving it every pod interface and node the agent knows
// (a restarted plugin must not wait for the next change to see them). No
// event is delivered while it is admitted, so it sees each change either
// in this replay or as an event, never neither.
func (a *Agent) admit(ctx context.Context, r *runner, p *sdkhost.Plugin, caps []sdk.Capability) {
	a.evmu.Lock()
	defer a.evmu.Unlock()
	a.known.Lock()
	pods := slices.SortedFunc(maps.Values(a.known.pods), func(x, y sdk.PodInterface) int {
		return strings.Compare(x.ContainerID+"/"+x.IfName, y.ContainerID+"/"+y.IfName)
	})
	nodes := slices.SortedFunc(maps.Values(a.known.nodes), func(x, y sdk.NodeInfo) int { return strings.Compare(x.Name, y.Name) })
	a.known.Unlock()
	if slices.Contains(caps, sdk.CapPodInterface) {
		for _, pi := range pods {
			if err := p.PodInterfaceEvent(ctx, sdk.PodInterfaceEventRequest{Kind: sdk.PodInterfaceAdded, Interface: pi}); err != nil {
				r.log.Warn("pod interface replay not taken", "pod", pi.PodNamespace+"/"+pi.PodName, "error", err)
			}
		}
	}
	if slices.Contains(caps, sdk.CapNodeEvents) {
		for _, n := range nodes {
			if err := p.NodeEvent(ctx, sdk.NodeEventRequest{Kind: sdk.NodeAdded, Node: n}); err != nil {
				r.log.Warn("node replay not taken", "node", n.Name, "error", err)
			}
		}
	}
	r.set(func(r *runner) {
		r.started = true
		if r.state == StateStarting { // a plugin may call Synced inside Start
			r.state = StateRunning
		}
	})
	if len(pods)+len(nodes) > 0 {
		r.log.Info("plugin started; replayed what it missed", "pods", len(pods), "nodes", len(nodes))
	}
}
