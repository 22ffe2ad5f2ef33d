package agent

import (
	"context"
	"errors"
	"slices"

	"switchyard.dev/switchyard/host/cniserver"
	"switchyard.dev/switchyard/host/ifstore"
	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/sdk"
)

// The agent's side of the CNI path: the CNI server (host/cniserver) asks
// which plugin handles CNI on each request, so a plugin that restarts is
// picked up again as soon as its new incarnation runs. Pod interface events
// from the interface store fan out through PodInterfaceEvent (events.go).

// CNIPlugin returns the running plugin that handles CNI: the first one in
// config order that declared the capability. ok is false while none runs
// (not started yet, or restarting), which the CNI server reports as "try
// again later". It is the CNI server's Resolver as it is.
func (a *Agent) CNIPlugin() (p cniserver.Plugin, ok bool) {
	ps := a.running(sdk.CapCNI)
	if len(ps) == 0 || ps[0].p.Exited() {
		return nil, false
	}
	return ps[0].p, true
}

// SetAttachments gives the agent the CNI path's records (the interface
// store's, cniserver.Node.Attachments): the plugin that handles CNI gets
// them at every Start, as the one record of what it attached. Call it
// before Start.
func (a *Agent) SetAttachments(list func() []sdk.PodInterface) { a.attachments = list }

// attachmentsFor returns what a plugin with caps gets as
// StartArgs.Attachments: the records, for the CNI plugin only.
func (a *Agent) attachmentsFor(caps []sdk.Capability) []sdk.PodInterface {
	if a.attachments == nil || !slices.Contains(caps, sdk.CapCNI) {
		return nil
	}
	return a.attachments()
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
