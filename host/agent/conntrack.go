package agent

import (
	"context"
	"fmt"

	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/sdkhost"
)

var _ sdkhost.ConntrackFlusher = (*service)(nil)

// FlushConntrack removes conntrack entries of a zone granted to the
// plugin (or published to it), never of the shared zone 0, with
// NXT_CT_FLUSH; the switch's answer (after a barrier) is the result.
func (s *service) FlushConntrack(ctx context.Context, f sdk.ConntrackFilter) error {
	if err := s.admit(); err != nil {
		return err
	}
	return s.a.FlushConntrack(ctx, s.name(), f)
}

// FlushConntrack removes owner's conntrack entries matching f (see
// sdk.ConntrackFlusher).
func (a *Agent) FlushConntrack(ctx context.Context, owner string, f sdk.ConntrackFilter) error {
	if f.Zone == 0 {
		return fmt.Errorf("%w: plugin %q: conntrack flush of zone 0, which every plugin shares; request a ct zone (sdk.ResourceCTZone) and flush that", sdk.ErrInvalid, owner)
	}
	// A ct action in the zone is refused exactly when the zone is not the
	// plugin's to use.
	a.mu.Lock()
	err := a.arb.CheckActions(owner, "conntrack flush", []flow.Action{flow.Conntrack(flow.CT{Zone: f.Zone})})
	a.mu.Unlock()
	if err != nil {
		return err
	}
	m := &openflow.CTFlush{Zone: f.Zone, Protocol: f.Protocol,
		Orig:  openflow.CTTuple{Src: f.Orig.Src, Dst: f.Orig.Dst, SrcPort: f.Orig.SrcPort, DstPort: f.Orig.DstPort},
		Reply: openflow.CTTuple{Src: f.Reply.Src, Dst: f.Reply.Dst, SrcPort: f.Reply.SrcPort, DstPort: f.Reply.DstPort}}
	if _, err := a.sw.Request(ctx, m); err != nil {
		return fmt.Errorf("%w: plugin %q: conntrack flush in zone %d: %v", sdk.ErrSwitch, owner, f.Zone, err)
	}
	a.log.Debug("conntrack flushed", "plugin", owner, "zone", f.Zone, "protocol", f.Protocol, "orig", m.Orig, "reply", m.Reply)
	return nil
}
