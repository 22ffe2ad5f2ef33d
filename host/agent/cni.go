package agent

import (
	"context"
	"errors"
	"slices"

	"switchyard.dev/switchyard/host/ifstore"
	"switchyard.dev/switchyard/host/ovsdb"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/sdkhost"
)

// The agent's side of the CNI path: the CNI server (host/cniserver) asks
// which plugin handles CNI on each request, so a plugin that restarts is
// picked up again as soon as its new incarnation runs, and pod interface
// events from the interface store fan out to the plugins that subscribe.

// runningWith returns the live processes of the plugins, in config order,
// that declared capability c.
func (a *Agent) runningWith(c sdk.Capability) []*sdkhost.Plugin {
	a.pmu.Lock()
	runners := make([]*runner, 0, len(a.order))
	for _, name := range a.order {
		if r, ok := a.plugins[name]; ok {
			runners = append(runners, r)
		}
	}
	a.pmu.Unlock()
	var out []*sdkhost.Plugin
	for _, r := range runners {
		r.mu.Lock()
		p, caps, state := r.proc, r.caps, r.state
		r.mu.Unlock()
		if p == nil || p.Exited() || !slices.Contains(caps, c) {
			continue
		}
		if state != StateRunning && state != StateSynced {
			continue
		}
		out = append(out, p)
	}
	return out
}

// CNIPlugin returns the running plugin that handles CNI: the first one in
// config order that declared the capability. ok is false while none runs
// (not started yet, or restarting), which the CNI server reports as "try
// again later".
func (a *Agent) CNIPlugin() (p *sdkhost.Plugin, ok bool) {
	ps := a.runningWith(sdk.CapCNI)
	if len(ps) == 0 {
		return nil, false
	}
	return ps[0], true
}

// PublishPodInterface delivers a pod interface event to every running
// plugin that subscribes to them. A plugin that fails to take it is logged;
// delivery is not retried.
func (a *Agent) PublishPodInterface(ctx context.Context, ev sdk.PodInterfaceEventRequest) {
	for _, p := range a.runningWith(sdk.CapPodInterface) {
		if err := p.PodInterfaceEvent(ctx, ev); err != nil {
			a.log.Warn("pod interface event not delivered", "plugin_pid", p.Pid(), "error", err)
		}
	}
}

// PortView lets the interface store check its records against OVS at start:
// a pod whose port is gone (deleted while the agent was down) is stale.
type PortView struct{ DB *ovsdb.Client }

var _ ifstore.PortView = PortView{}

// OFPort reports the ofport of the named port, and whether it exists.
func (v PortView) OFPort(ctx context.Context, name string) (uint32, bool, error) {
	p, err := v.DB.Port(ctx, name)
	if errors.Is(err, ovsdb.ErrNoPort) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if p.OFPort <= 0 {
		return 0, false, nil
	}
	return uint32(p.OFPort), true, nil
}
