package agent

// Read-back, delete-by-tag, flow-removed and the packet-in metadata: what
// a plugin learns about its own flows from the switch itself.

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"switchyard.dev/switchyard/host/flowstore"
	"switchyard.dev/switchyard/host/ofxlate"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// expandTaggedLocked turns a delete-by-tag into strict deletes of every
// matching flow of owner: those in the store and those added earlier in
// the same batch. The switch and the store so drop exactly the same
// flows, in the batch's bundle.
func (a *Agent) expandTaggedLocked(owner string, i int, op flow.Op, ops []flowstore.Op) ([]flowstore.Op, error) {
	table := flowstore.AllTables
	if op.Flow.Table != "" {
		t, ok := a.arb.Table(op.Flow.Table)
		if !ok {
			return nil, fmt.Errorf("batch op %d: %w: plugin %q: delete by tag in table %q: no table of that name is declared", i, sdk.ErrUnknownTable, owner, op.Flow.Table)
		}
		table = int(t.ID)
	}
	tag, mask := op.Flow.Tag, op.TagMask
	for _, e := range a.store.Tagged(owner, table, tag, mask) {
		ops = append(ops, flowstore.Op{Kind: flow.OpDelete, Flow: e.R})
	}
	n := len(ops)
	for _, prev := range ops[:n] {
		if prev.Flow == nil || prev.Kind == flow.OpDelete {
			continue
		}
		if _, _, t := pipeline.SplitCookie(prev.Flow.Cookie); t&mask == tag&mask && (table == flowstore.AllTables || int(prev.Flow.TableID) == table) {
			ops = append(ops, flowstore.Op{Kind: flow.OpDelete, Flow: prev.Flow})
		}
	}
	return ops, nil
}

// reverseLocked is what reading switch flows back into owner's terms needs.
func (a *Agent) reverseLocked(owner string) (*ofxlate.Reverse, error) {
	p, ok := a.arb.Plugin(owner)
	if !ok {
		return nil, fmt.Errorf("%w: plugin %q is not registered", sdk.ErrInvalid, owner)
	}
	names := map[uint8]string{}
	for _, t := range a.arb.Layout() {
		names[t.ID] = t.Name
	}
	return &ofxlate.Reverse{Owner: owner, Prefix: p.Prefix, Fields: a.fields(owner),
		Table: func(id uint8) (string, bool) { n, ok := names[id]; return n, ok }}, nil
}

// ReadFlows reads owner's flows back from the switch (flow stats filtered by
// the owner's cookie prefix, the tag and the table).
func (a *Agent) ReadFlows(ctx context.Context, owner string, f sdk.FlowFilter) ([]sdk.FlowStats, error) {
	a.mu.Lock()
	rev, err := a.reverseLocked(owner)
	req := openflow.FlowStatsRequest{Table: openflow.TableAll, Cookie: pipeline.Cookie(rev.Prefix, 0, f.Tag&f.TagMask), CookieMask: pipeline.CookiePrefixMask | uint64(f.TagMask)}
	if err == nil && f.Table != "" {
		t, ok := a.arb.Table(f.Table)
		switch {
		case !ok:
			err = fmt.Errorf("%w: plugin %q: read back flows of table %q: no table of that name is declared", sdk.ErrUnknownTable, owner, f.Table)
		case t.Owner != owner && !t.Exported:
			err = fmt.Errorf("%w: plugin %q may not read table %q (ID %d): it is private to plugin %q", sdk.ErrNotOwner, owner, t.Name, t.ID, t.Owner)
		}
		req.Table = t.ID
	}
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	got, err := a.sw.DumpFlows(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%w: plugin %q: read back flows: %v", sdk.ErrSwitch, owner, err)
	}
	out := make([]sdk.FlowStats, 0, len(got))
	for i := range got {
		fl, err := rev.FromFlow(&got[i].Flow)
		if err != nil {
			return nil, fmt.Errorf("read back %s: %w", got[i].Flow.String(), err)
		}
		out = append(out, sdk.FlowStats{Flow: *fl, Packets: got[i].PacketCount, Bytes: got[i].ByteCount,
			Duration: time.Duration(got[i].DurationSec)*time.Second + time.Duration(got[i].DurationNsec)})
	}
	return out, nil
}

func toCounters[T any](xs []T, f func(T) sdk.Counter) []sdk.Counter {
	out := make([]sdk.Counter, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

// wanted says whether local ID id was asked for (no IDs: all), and marks it seen.
func wanted(ids map[uint32]bool, id uint32) bool {
	if len(ids) == 0 {
		return true
	}
	if _, ok := ids[id]; ok {
		ids[id] = true
		return true
	}
	return false
}

func missing(ids map[uint32]bool) []uint32 {
	var out []uint32
	for id, seen := range ids {
		if !seen {
			out = append(out, id)
		}
	}
	return out
}

func (a *Agent) prefix(owner string) (uint16, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.arb.Plugin(owner)
	if !ok {
		return 0, fmt.Errorf("%w: plugin %q is not registered", sdk.ErrInvalid, owner)
	}
	return p.Prefix, nil
}

// GroupStats reads owner's group counters from the switch.
func (a *Agent) GroupStats(ctx context.Context, owner string, ids ...uint32) ([]sdk.GroupStats, error) {
	return readOwned(ctx, a, owner, "group", ids, 24,
		func() ([]openflow.GroupStats, error) { return a.sw.GroupStats(ctx, openflow.GroupAll) },
		func(g openflow.GroupStats) uint32 { return g.GroupID },
		func(id uint32, g openflow.GroupStats) sdk.GroupStats {
			return sdk.GroupStats{ID: id, RefCount: g.RefCount, Packets: g.PacketCount, Bytes: g.ByteCount,
				Duration: time.Duration(g.DurationSec)*time.Second + time.Duration(g.DurationNsec),
				Buckets: toCounters(g.Buckets, func(b openflow.BucketStats) sdk.Counter {
					return sdk.Counter{Packets: b.PacketCount, Bytes: b.ByteCount}
				})}
		})
}

// MeterStats reads owner's meter counters from the switch.
func (a *Agent) MeterStats(ctx context.Context, owner string, ids ...uint32) ([]sdk.MeterStats, error) {
	return readOwned(ctx, a, owner, "meter", ids, 10,
		func() ([]openflow.MeterStats, error) { return a.sw.MeterStats(ctx, openflow.MeterAll) },
		func(m openflow.MeterStats) uint32 { return m.MeterID },
		func(id uint32, m openflow.MeterStats) sdk.MeterStats {
			return sdk.MeterStats{ID: id, FlowCount: m.FlowCount, Packets: m.PacketInCount, Bytes: m.ByteInCount,
				Duration: time.Duration(m.DurationSec)*time.Second + time.Duration(m.DurationNsec),
				Bands: toCounters(m.Bands, func(b openflow.MeterBandStats) sdk.Counter {
					return sdk.Counter{Packets: b.PacketCount, Bytes: b.ByteCount}
				})}
		})
}

// readOwned reads every group or meter from the switch and keeps owner's:
// those whose global ID carries its prefix above the low shift bits (the
// plugin-local ID), limited to ids when any are given. An ID asked for and
// not on the switch is named in an ErrNotFound, next to what was found.
func readOwned[T, S any](ctx context.Context, a *Agent, owner, kind string, ids []uint32, shift uint,
	read func() ([]T, error), global func(T) uint32, convert func(local uint32, t T) S) ([]S, error) {
	prefix, err := a.prefix(owner)
	if err != nil {
		return nil, err
	}
	want := map[uint32]bool{}
	for _, id := range ids {
		want[id] = false
	}
	got, err := read()
	if err != nil {
		return nil, fmt.Errorf("%w: plugin %q: read back %ss: %v", sdk.ErrSwitch, owner, kind, err)
	}
	localMask := uint32(1)<<shift - 1
	var out []S
	for _, t := range got {
		id := global(t)
		if id>>shift != uint32(prefix) || !wanted(want, id&localMask) {
			continue
		}
		out = append(out, convert(id&localMask, t))
	}
	if m := missing(want); len(m) > 0 {
		return out, fmt.Errorf("%w: plugin %q has no %s %v on the switch", sdk.ErrNotFound, owner, kind, m)
	}
	return out, nil
}

func (s *service) Flows(ctx context.Context, f sdk.FlowFilter) ([]sdk.FlowStats, error) {
	if err := s.admit(); err != nil {
		return nil, err
	}
	return s.a.ReadFlows(ctx, s.name(), f)
}

func (s *service) GroupStats(ctx context.Context, ids ...uint32) ([]sdk.GroupStats, error) {
	if err := s.admit(); err != nil {
		return nil, err
	}
	return s.a.GroupStats(ctx, s.name(), ids...)
}

func (s *service) MeterStats(ctx context.Context, ids ...uint32) ([]sdk.MeterStats, error) {
	if err := s.admit(); err != nil {
		return nil, err
	}
	return s.a.MeterStats(ctx, s.name(), ids...)
}

// resumeTableLocked resolves a packet-out's ResumeTable: a table owner
// may write.
func (a *Agent) resumeTableLocked(owner, name string) (uint8, error) {
	t, ok := a.arb.Table(name)
	if !ok {
		return 0, fmt.Errorf("%w: plugin %q: packet-out resumes at table %q, which is not declared", sdk.ErrUnknownTable, owner, name)
	}
	if t.Owner != owner && !t.Exported {
		return 0, fmt.Errorf("%w: plugin %q: packet-out may not resume at table %q (ID %d): it is private to plugin %q", sdk.ErrNotOwner, owner, t.Name, t.ID, t.Owner)
	}
	return t.ID, nil
}

// packetInMeta fills the registers (as owner's named fields and the
// well-known ones) and the conntrack state of a packet-in.
func packetInMeta(req *sdk.PacketInRequest, m openflow.Match, fields map[string]flow.Bits) {
	var regs [16]uint32
	var haveReg [16]bool
	ct := &req.CT
	var tuple sdk.CTTuple
	for _, f := range m {
		switch {
		case f.Field >= openflow.FieldReg0 && f.Field <= openflow.FieldReg15:
			n := f.Field - openflow.FieldReg0
			regs[n], haveReg[n] = uint32(f.Uint64()), true
		case f.Field == openflow.FieldInPort:
			req.InPort = uint32(f.Uint64())
		case f.Field == openflow.FieldCTState:
			ct.State = uint32(f.Uint64())
		case f.Field == openflow.FieldCTZone:
			ct.Zone = uint16(f.Uint64())
		case f.Field == openflow.FieldCTMark:
			ct.Mark = uint32(f.Uint64())
		case f.Field == openflow.FieldCTLabel:
			ct.Label = [16]byte(f.Value[:16])
		case f.Field == openflow.FieldCTNwSrc, f.Field == openflow.FieldCTIPv6Src:
			tuple.Src = f.Addr()
		case f.Field == openflow.FieldCTNwDst, f.Field == openflow.FieldCTIPv6Dst:
			tuple.Dst = f.Addr()
		case f.Field == openflow.FieldCTNwProto:
			tuple.Proto = uint8(f.Uint64())
		case f.Field == openflow.FieldCTTpSrc:
			tuple.SrcPort = uint16(f.Uint64())
		case f.Field == openflow.FieldCTTpDst:
			tuple.DstPort = uint16(f.Uint64())
		}
	}
	if tuple.Src.IsValid() || tuple.Dst.IsValid() {
		if !tuple.Src.IsValid() {
			tuple.Src = netip.IPv4Unspecified()
		}
		ct.Tuple = &tuple
	}
	// Every field of the owner gets a value, 0 included: OVS leaves zero
	// registers out of the metadata.
	req.Fields = make(map[string]uint32, len(fields))
	for name, b := range fields {
		req.Fields[name] = regs[b.Reg] & b.Mask() >> b.Offset
	}
}

// flowRemoved forgets a flow the switch timed out and tells its owner if
// it asked. A flow re-added with the same key and cookie since the switch
// removed it is a race this cannot tell apart; the owner's next Apply of
// it puts it back.
func (a *Agent) flowRemoved(ctx context.Context, fr *openflow.FlowRemoved) {
	if fr == nil || !fr.Reason.Timeout() {
		return
	}
	prefix, _, _ := pipeline.SplitCookie(fr.Flow.Cookie)
	a.mu.Lock()
	owner, ok := a.arb.PluginByPrefix(prefix)
	if !ok {
		a.mu.Unlock()
		return
	}
	rev, err := a.reverseLocked(owner)
	var e *flowstore.Entry
	if err == nil {
		var m flow.Match
		if m, err = rev.FromMatch(fr.Flow.Match); err == nil {
			r := &pipeline.Resolved{Flow: &flow.Flow{Match: m}, Fields: rev.Fields}
			key := pipeline.Key{Table: fr.Flow.Table, Priority: fr.Flow.Priority, Match: r.MatchString()}
			if cur, ok := a.store.Lookup(key); ok && cur.R.Owner == owner && cur.R.Cookie == fr.Flow.Cookie {
				e = cur
				a.store.Forget(owner, []*flowstore.Entry{e})
			}
		}
	}
	a.mu.Unlock()
	if err != nil {
		a.log.Warn("flow removed by the switch could not be read back", "plugin", owner, "flow", fr.Flow.String(), "error", err)
		return
	}
	if e == nil {
		return
	}
	a.log.Debug("switch timed out a flow; forgotten", "plugin", owner, "flow", e.R.String(), "reason", fr.Reason.String())
	for _, s := range a.running(sdk.CapFlowRemoved) {
		if s.name != owner {
			continue
		}
		req := sdk.FlowRemovedRequest{Flow: *e.R.Flow, Reason: sdk.RemovedIdleTimeout, Packets: fr.PacketCount, Bytes: fr.ByteCount,
			Duration: time.Duration(fr.DurationSec)*time.Second + time.Duration(fr.DurationNsec)}
		if fr.Reason == openflow.RemovedHardTimeout {
			req.Reason = sdk.RemovedHardTimeout
		}
		p := s.p
		go func() {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := p.FlowRemoved(cctx, req); err != nil {
				a.log.Debug("flow-removed delivery failed", "plugin", owner, "error", err)
			}
		}()
	}
}
