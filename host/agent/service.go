package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"switchyard.dev/switchyard/host/ofxlate"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/sdkhost"
)

// service is what one plugin reaches through its Host handle.
type service struct {
	a *Agent
	r *runner
}

var _ sdkhost.HostService = (*service)(nil)

func (s *service) name() string { return s.r.spec.Name }

func (s *service) admit() error {
	if !s.r.limiter.allow() {
		return fmt.Errorf("%w: plugin %q is over its request rate of %v/s (burst %d); batch more per request", sdk.ErrLimit, s.name(), s.r.lim.RequestsPerSecond, s.r.lim.Burst)
	}
	return nil
}

func (s *service) Apply(ctx context.Context, b *flow.Batch) (err error) {
	start := time.Now()
	defer func() { s.a.metrics.ObserveBatch(s.name(), b.Len(), time.Since(start), err) }()
	if err := s.admit(); err != nil {
		return err
	}
	return s.a.Apply(ctx, s.name(), b, s.r.lim)
}

func (s *service) CreatePort(ctx context.Context, req sdk.PortRequest) (sdk.Port, error) {
	if err := s.admit(); err != nil {
		return sdk.Port{}, err
	}
	if req.Name == "" || len(req.Name) > 15 {
		return sdk.Port{}, fmt.Errorf("%w: plugin %q: port name %q must be 1-15 characters", sdk.ErrInvalid, s.name(), req.Name)
	}
	if req.OFPort > ovsdb.MaxOFPort {
		return sdk.Port{}, fmt.Errorf("%w: plugin %q: port %q: OpenFlow port number %d is out of range; request 1-%d, or 0 for any", sdk.ErrInvalid, s.name(), req.Name, req.OFPort, ovsdb.MaxOFPort)
	}
	if g, ok := s.a.portGrant(req.OFPort); ok && req.NoWait && g.Name != req.Name {
		// ovs-vswitchd would give the port another number, and meanwhile
		// the port book would say the number is this plugin's.
		return sdk.Port{}, fmt.Errorf("%w: plugin %q: port %q: OpenFlow port %d belongs to port %q; request another number, or 0 for any", sdk.ErrConflict, s.name(), req.Name, req.OFPort, g.Name)
	}
	created, err := s.a.db.EnsurePort(ctx, ovsdb.PortSpec{Name: req.Name, Type: req.Type, Options: req.Options, ExternalIDs: req.ExternalIDs, OFPort: req.OFPort, Owner: s.name(), Exported: req.Exported})
	if err != nil {
		return sdk.Port{}, fmt.Errorf("%w: plugin %q: create port %q: %v", sdk.ErrSwitch, s.name(), req.Name, err)
	}
	if req.NoWait && created != 0 {
		// The number is the one the port was created with; WaitPort
		// confirms that ovs-vswitchd gave it.
		p := sdk.Port{Name: req.Name, OFPort: created, OFPortRequest: created, Owner: s.name(), Exported: req.Exported}
		s.a.recordPort(p.OFPort, pipeline.PortGrant{Name: p.Name, Owner: p.Owner, Exported: p.Exported})
		return p, nil
	}
	return s.waitPort(ctx, req.Name, false)
}

func (s *service) WaitPort(ctx context.Context, name string) (sdk.Port, error) {
	if err := s.admit(); err != nil {
		return sdk.Port{}, err
	}
	return s.waitPort(ctx, name, true)
}

// waitPort waits until ovs-vswitchd attached the port and records its
// owner for the output checks. With exact, a port whose number is not the
// one it was created with fails: its creator already installed flows for
// the requested number.
func (s *service) waitPort(ctx context.Context, name string, exact bool) (sdk.Port, error) {
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := s.a.db.WaitOFPort(wctx, name); err != nil {
		if errors.Is(err, ovsdb.ErrNoPort) {
			return sdk.Port{}, fmt.Errorf("%w: port %q", sdk.ErrNotFound, name)
		}
		return sdk.Port{}, fmt.Errorf("%w: plugin %q: %v", sdk.ErrSwitch, s.name(), err)
	}
	info, err := s.a.db.Port(ctx, name)
	if err != nil {
		return sdk.Port{}, fmt.Errorf("%w: %v", sdk.ErrSwitch, err)
	}
	p := sdkPort(info)
	// The port as OVSDB has it: a port that already existed keeps the
	// owner and export it was created with.
	s.a.recordPort(p.OFPort, pipeline.PortGrant{Name: p.Name, Owner: p.Owner, Exported: p.Exported})
	if exact && info.OFPortRequest > 0 && info.OFPort != info.OFPortRequest {
		s.a.log.Warn("ovs-vswitchd gave a port another OpenFlow number than it was created with", "plugin", s.name(), "port", name,
			"requested", info.OFPortRequest, "ofport", info.OFPort)
		return p, fmt.Errorf("%w: plugin %q: ovs-vswitchd gave port %q OpenFlow port %d, not the %d it was created with (a port the host does not manage holds that number); delete the port and create it again",
			sdk.ErrSwitch, s.name(), name, info.OFPort, info.OFPortRequest)
	}
	return p, nil
}

func (s *service) DeletePort(ctx context.Context, name string) error {
	if err := s.admit(); err != nil {
		return err
	}
	p, err := s.a.db.Port(ctx, name)
	if errors.Is(err, ovsdb.ErrNoPort) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", sdk.ErrSwitch, err)
	}
	if p.Owner != s.name() {
		return fmt.Errorf("%w: plugin %q may not delete port %q: it belongs to %q", sdk.ErrNotOwner, s.name(), name, p.Owner)
	}
	if err := s.a.db.DeletePort(ctx, name); err != nil {
		return fmt.Errorf("%w: plugin %q: delete port %q: %v", sdk.ErrSwitch, s.name(), name, err)
	}
	s.a.forgetPort(name)
	return nil
}

var _ sdkhost.PortLabeler = (*service)(nil)

// LabelPort sets external_ids on a port of the calling plugin's own.
func (s *service) LabelPort(ctx context.Context, name string, externalIDs map[string]string) error {
	if err := s.admit(); err != nil {
		return err
	}
	for k := range externalIDs {
		if k == ovsdb.OwnerKey || k == ovsdb.ExportedKey {
			return fmt.Errorf("%w: plugin %q may not set external_ids key %q of port %q: the host keeps it (ask for an exported port in CreatePort instead)",
				sdk.ErrInvalid, s.name(), k, name)
		}
		if k == "" {
			return fmt.Errorf("%w: plugin %q: an empty external_ids key for port %q", sdk.ErrInvalid, s.name(), name)
		}
	}
	p, err := s.a.db.Port(ctx, name)
	if errors.Is(err, ovsdb.ErrNoPort) {
		return fmt.Errorf("%w: port %q", sdk.ErrNotFound, name)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", sdk.ErrSwitch, err)
	}
	if p.Owner != s.name() {
		return fmt.Errorf("%w: plugin %q may not label port %q: it belongs to %q", sdk.ErrNotOwner, s.name(), name, p.Owner)
	}
	if err := s.a.db.LabelPort(ctx, name, externalIDs); err != nil {
		return fmt.Errorf("%w: plugin %q: label port %q: %v", sdk.ErrSwitch, s.name(), name, err)
	}
	return nil
}

func (s *service) Port(ctx context.Context, name string) (sdk.Port, error) {
	p, err := s.a.db.Port(ctx, name)
	if errors.Is(err, ovsdb.ErrNoPort) {
		return sdk.Port{}, fmt.Errorf("%w: port %q", sdk.ErrNotFound, name)
	}
	if err != nil {
		return sdk.Port{}, fmt.Errorf("%w: %v", sdk.ErrSwitch, err)
	}
	return sdkPort(p), nil
}

// sdkPort is a port as OVSDB reports it, for a plugin: a number not
// assigned yet (0) or failed (-1) reads 0.
func sdkPort(p ovsdb.PortInfo) sdk.Port {
	out := sdk.Port{Name: p.Name, Owner: p.Owner, Exported: p.Exported,
		OFPort: uint32(max(p.OFPort, 0)), OFPortRequest: uint32(max(p.OFPortRequest, 0))}
	if mac, err := net.ParseMAC(p.MAC); err == nil {
		out.MAC = mac
	}
	return out
}

func (s *service) PacketOut(ctx context.Context, po sdk.PacketOut) error {
	if err := s.admit(); err != nil {
		return err
	}
	if po.Resubmit && po.ResumeTable != "" {
		return fmt.Errorf("%w: plugin %q: packet-out sets both Resubmit and ResumeTable %q; choose one", sdk.ErrInvalid, s.name(), po.ResumeTable)
	}
	// The layout must not change while the actions are translated against
	// it (a resubmit target resolves through the arbiter).
	s.a.lay.RLock()
	defer s.a.lay.RUnlock()
	s.a.mu.Lock()
	fields := s.a.fields(s.name())
	p, _ := s.a.arb.Plugin(s.name())
	resume := pipeline.TableNone
	var rerr error
	if po.ResumeTable != "" {
		resume, rerr = s.a.resumeTableLocked(s.name(), po.ResumeTable)
	}
	s.a.mu.Unlock()
	if rerr != nil {
		return rerr
	}
	for i, act := range po.Actions {
		if act == nil {
			return fmt.Errorf("%w: plugin %q: packet-out: action %d is missing or of an unknown kind", sdk.ErrInvalid, s.name(), i)
		}
		if err := act.Validate(); err != nil {
			return fmt.Errorf("%w: plugin %q: packet-out: %v", sdk.ErrInvalid, s.name(), err)
		}
		switch act.(type) {
		case *flow.ActCT, *flow.ActLearn:
			return fmt.Errorf("%w: plugin %q: packet-out cannot use %s", sdk.ErrInvalid, s.name(), act)
		}
	}
	if err := s.a.arb.CheckActions(s.name(), "packet-out", po.Actions); err != nil {
		return err
	}
	s.a.mu.Lock()
	c := s.a.bucketContext(s.name(), fields, p.Prefix)
	s.a.mu.Unlock()
	acts, err := ofxlate.Actions(po.Actions, c)
	if err != nil {
		return fmt.Errorf("plugin %q: packet-out: %w", s.name(), err)
	}
	if po.Resubmit {
		acts = append(acts, openflow.Output{Port: openflow.PortTable})
	}
	if resume != pipeline.TableNone {
		acts = append(acts, openflow.ResubmitTable(resume))
	}
	if err := s.a.sw.Send(ctx, &openflow.PacketOut{InPort: po.InPort, Actions: acts, Data: po.Data}); err != nil {
		return fmt.Errorf("%w: plugin %q: packet-out: %v", sdk.ErrSwitch, s.name(), err)
	}
	return nil
}

func (s *service) NodeFacts(context.Context) (sdk.NodeFacts, error) { return s.a.NodeFacts(), nil }

func (s *service) Token(context.Context) (string, time.Time, error) {
	t, exp, err := s.a.clusterToken()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("plugin %q: %w", s.name(), err)
	}
	return t, exp, nil
}

func (s *service) Synced(ctx context.Context) error {
	if _, err := s.a.Synced(ctx, s.name()); err != nil {
		return err
	}
	s.r.markSynced()
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		s.a.sweepIfAllSynced(ctx)
		// The sync and the sweep's dump are over: hand their garbage back.
		s.a.mem.afterBurst()
	}()
	return nil
}

// packetIn hands a packet-in to the plugin whose flow (by cookie) or table
// sent it.
func (a *Agent) packetIn(pi *openflow.PacketIn) {
	if pi == nil || a.traces.deliver(pi) {
		return
	}
	prefix, _, tag := pipeline.SplitCookie(pi.Cookie)
	a.mu.Lock()
	owner, ok := a.arb.PluginByPrefix(prefix)
	t, tok := a.arb.TableByID(pi.Table)
	if !ok && tok {
		owner, ok = t.Owner, true
	}
	var fields map[string]flow.Bits
	if ok {
		fields = a.fields(owner)
	}
	a.mu.Unlock()
	if !ok {
		a.log.Debug("packet-in from a table and cookie no plugin owns", "table_id", pi.Table, "cookie", fmt.Sprintf("%#x", pi.Cookie))
		return
	}
	a.pmu.Lock()
	r := a.plugins[owner]
	a.pmu.Unlock()
	if r == nil {
		return
	}
	r.mu.Lock()
	wants := false
	for _, c := range r.caps {
		wants = wants || c == sdk.CapPacketIn
	}
	r.mu.Unlock()
	if !wants {
		return
	}
	req := sdk.PacketInRequest{Table: t.Name, TableID: pi.Table, Tag: tag, Userdata: pi.Userdata, Data: pi.Data}
	packetInMeta(&req, pi.Match, fields)
	select {
	case r.pktin <- req:
	default:
		a.log.Warn("packet-in queue full; dropping", "plugin", owner, "table", t.Name)
	}
}
