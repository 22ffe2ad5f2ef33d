package ofxlate

import (
	"fmt"

	"switchyard.dev/switchyard/host/flowstore"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

var matchFields = map[flow.MatchKind]openflow.Field{
	flow.MatchInPort:   openflow.FieldInPort,
	flow.MatchEthSrc:   openflow.FieldEthSrc,
	flow.MatchEthDst:   openflow.FieldEthDst,
	flow.MatchEthType:  openflow.FieldEthType,
	flow.MatchVlanVID:  openflow.FieldVLANVID,
	flow.MatchIPProto:  openflow.FieldIPProto,
	flow.MatchIPv4Src:  openflow.FieldIPv4Src,
	flow.MatchIPv4Dst:  openflow.FieldIPv4Dst,
	flow.MatchIPv6Src:  openflow.FieldIPv6Src,
	flow.MatchIPv6Dst:  openflow.FieldIPv6Dst,
	flow.MatchTCPSrc:   openflow.FieldTCPSrc,
	flow.MatchTCPDst:   openflow.FieldTCPDst,
	flow.MatchUDPSrc:   openflow.FieldUDPSrc,
	flow.MatchUDPDst:   openflow.FieldUDPDst,
	flow.MatchICMPType: openflow.FieldICMPv4Type,
	flow.MatchICMPCode: openflow.FieldICMPv4Code,
	flow.MatchARPOp:    openflow.FieldARPOp,
	flow.MatchARPSpa:   openflow.FieldARPSPA,
	flow.MatchARPTpa:   openflow.FieldARPTPA,
	flow.MatchARPSha:   openflow.FieldARPSHA,
	flow.MatchARPTha:   openflow.FieldARPTHA,
	flow.MatchCTState:  openflow.FieldCTState,
	flow.MatchCTZone:   openflow.FieldCTZone,
	flow.MatchCTMark:   openflow.FieldCTMark,
	flow.MatchTunID:    openflow.FieldTunID,
	flow.MatchTunDst:   openflow.FieldTunIPv4Dst,
	flow.MatchMetadata: openflow.FieldMetadata,
	flow.MatchConjID:   openflow.FieldConjID,
}

func reg(b flow.Bits) openflow.Field { return openflow.FieldReg0 + openflow.Field(b.Reg) }

func matchField(m flow.MatchField, fields map[string]flow.Bits) (openflow.MatchField, error) {
	switch m.Kind {
	case flow.MatchRegField:
		b, ok := fields[m.Field.Name]
		if !ok {
			return openflow.MatchField{}, fmt.Errorf("%w: register field %q is not resolved", sdk.ErrUnallocatedField, m.Field.Name)
		}
		return openflow.Masked(reg(b), m.Uint()<<b.Offset, (m.MaskUint()<<b.Offset)&uint64(b.Mask())), nil
	case flow.MatchVlanVID:
		// OpenFlow marks "a VLAN tag is present" with the 0x1000 bit.
		return openflow.VLANID(uint16(m.Uint())), nil
	}
	f, ok := matchFields[m.Kind]
	if !ok {
		return openflow.MatchField{}, fmt.Errorf("%w: match on %s is not supported by the switch codec", sdk.ErrInvalid, m.Kind)
	}
	return openflow.Bytes(f, m.Value, m.Mask), nil
}

// Match translates a match.
func Match(m flow.Match, fields map[string]flow.Bits) (openflow.Match, error) {
	out := make(openflow.Match, 0, m.Len())
	for _, f := range m.Fields() {
		of, err := matchField(f, fields)
		if err != nil {
			return nil, err
		}
		out = append(out, of)
	}
	return out, nil
}

// Context is what translating actions needs beyond the actions themselves.
type Context struct {
	Fields map[string]flow.Bits
	Prefix uint16
	// CTResume are the resolved ct(table=) targets, one per ct action.
	CTResume []uint8
}

func (c *Context) bits(f flow.Field) (flow.Bits, error) {
	b, ok := c.Fields[f.Name]
	if !ok {
		return flow.Bits{}, fmt.Errorf("%w: register field %q is not resolved", sdk.ErrUnallocatedField, f.Name)
	}
	return b, nil
}

// Actions translates an action list.
func Actions(as []flow.Action, c *Context) ([]openflow.Action, error) {
	out := make([]openflow.Action, 0, len(as))
	ct := 0
	for _, a := range as {
		var oa openflow.Action
		switch a.Kind {
		case flow.ActOutput:
			oa = openflow.Output{Port: a.Port}
		case flow.ActInPort:
			oa = openflow.Output{Port: openflow.PortInPort}
		case flow.ActNormal:
			oa = openflow.Output{Port: openflow.PortNormal}
		case flow.ActOutputField:
			b, err := c.bits(a.Field)
			if err != nil {
				return nil, err
			}
			oa = openflow.OutputReg{Src: openflow.Bits(reg(b), int(b.Offset), int(b.Width))}
		case flow.ActConjunction:
			k, n := a.ConjunctionClause()
			oa = openflow.Conjunction{ID: uint32(a.Uint), Clause: k, NClauses: n}
		case flow.ActController:
			oa = openflow.Controller{MaxLen: a.MaxLen, Userdata: a.Userdata, Reason: openflow.ReasonAction}
		case flow.ActSetField:
			if a.SetKind == flow.MatchVlanVID {
				oa = openflow.Set(openflow.VLANID(uint16(flow.MatchField{Value: a.Value}.Uint())))
				break
			}
			f, ok := matchFields[a.SetKind]
			if !ok {
				return nil, fmt.Errorf("%w: set_field of %s is not supported by the switch codec", sdk.ErrInvalid, a.SetKind)
			}
			oa = openflow.Set(openflow.Bytes(f, a.Value, nil))
		case flow.ActLoadField:
			b, err := c.bits(a.Field)
			if err != nil {
				return nil, err
			}
			oa = openflow.Load(reg(b), int(b.Offset), int(b.Width), a.Uint)
		case flow.ActMoveField:
			src, err := c.bits(a.From)
			if err != nil {
				return nil, err
			}
			dst, err := c.bits(a.Field)
			if err != nil {
				return nil, err
			}
			oa = openflow.Move{Src: openflow.Bits(reg(src), int(src.Offset), int(src.Width)), Dst: openflow.Bits(reg(dst), int(dst.Offset), int(dst.Width))}
		case flow.ActCT:
			x := openflow.CT{Commit: a.CT.Commit, Zone: a.CT.Zone}
			if ct < len(c.CTResume) && c.CTResume[ct] != pipeline.TableNone {
				x.Recirc, x.Table = true, c.CTResume[ct]
			}
			ct++
			if a.CT.NAT {
				x.NAT = &openflow.NAT{}
			}
			if a.CT.MarkMask != 0 {
				x.Exec = []openflow.Action{openflow.Set(openflow.Masked(openflow.FieldCTMark, uint64(a.CT.Mark), uint64(a.CT.MarkMask)))}
			}
			oa = x
		case flow.ActGroup:
			oa = openflow.Group{ID: pipeline.GroupID(c.Prefix, uint32(a.Uint))}
		case flow.ActMeter:
			oa = openflow.Meter{ID: pipeline.MeterID(c.Prefix, uint32(a.Uint))}
		case flow.ActDecTTL:
			oa = openflow.DecTTL{}
		case flow.ActPushVLAN:
			oa = openflow.PushVLAN{EtherType: uint16(a.Uint)}
		case flow.ActPopVLAN:
			oa = openflow.PopVLAN{}
		default:
			return nil, fmt.Errorf("%w: action kind %d is not supported", sdk.ErrInvalid, a.Kind)
		}
		out = append(out, oa)
	}
	return out, nil
}

// Flow translates a resolved flow.
func Flow(r *pipeline.Resolved) (openflow.Flow, error) {
	m, err := Match(r.Flow.Match, r.Fields)
	if err != nil {
		return openflow.Flow{}, fmt.Errorf("plugin %q: flow %s: %w", r.Owner, r.Flow, err)
	}
	acts, err := Actions(r.Flow.Actions, &Context{Fields: r.Fields, Prefix: r.Prefix, CTResume: r.CTResume})
	if err != nil {
		return openflow.Flow{}, fmt.Errorf("plugin %q: flow %s: %w", r.Owner, r.Flow, err)
	}
	f := openflow.Flow{Table: r.TableID, Priority: r.Flow.Priority, Cookie: r.Cookie, IdleTimeout: r.Flow.IdleTimeout, HardTimeout: r.Flow.HardTimeout, Match: m}
	if f.IdleTimeout != 0 || f.HardTimeout != 0 {
		// The switch tells the host when it times the flow out, so the
		// flow store (and the owner, if it asked) learn that it is gone.
		f.Flags |= openflow.FlagSendFlowRem
	}
	if len(acts) > 0 {
		f.Instructions = append(f.Instructions, openflow.Apply(acts...))
	}
	if r.Goto != pipeline.TableNone {
		f.Instructions = append(f.Instructions, openflow.Goto(r.Goto))
	}
	return f, nil
}

// FlowMod builds the flow mod for one change. Adds and modifies both use
// OFPFC_ADD: it replaces an existing flow with the same key, including its
// cookie, which is what a resync after a restart needs.
func FlowMod(kind flow.OpKind, r *pipeline.Resolved) (*openflow.FlowMod, error) {
	f, err := Flow(r)
	if err != nil {
		return nil, err
	}
	if kind == flow.OpDelete {
		f.Instructions = nil
		return &openflow.FlowMod{Command: openflow.FlowDeleteStrict, Flow: f}, nil
	}
	return &openflow.FlowMod{Command: openflow.FlowAdd, Flow: f}, nil
}

var groupTypes = map[flow.GroupType]openflow.GroupType{
	flow.GroupAll: openflow.GroupTypeAll, flow.GroupSelect: openflow.GroupTypeSelect,
	flow.GroupIndirect: openflow.GroupTypeIndirect, flow.GroupFastFailover: openflow.GroupTypeFastFailover,
}

// GroupMod builds the group mod for one change. fields resolves register
// fields used in buckets (the owner's).
func GroupMod(kind flow.OpKind, g *flowstore.GroupEntry, fields map[string]flow.Bits) (*openflow.GroupMod, error) {
	m := &openflow.GroupMod{GroupID: g.Global, Type: groupTypes[g.Group.Type]}
	switch kind {
	case flow.OpDelete:
		m.Command = openflow.GroupDelete
		return m, nil
	case flow.OpModify:
		m.Command = openflow.GroupModify
	default:
		m.Command = openflow.GroupAdd
	}
	for _, bk := range g.Group.Buckets {
		acts, err := Actions(bk.Actions, &Context{Fields: fields, Prefix: g.Prefix})
		if err != nil {
			return nil, fmt.Errorf("plugin %q: group %d: %w", g.Owner, g.Group.ID, err)
		}
		m.Buckets = append(m.Buckets, openflow.Bucket{Weight: bk.Weight, WatchPort: bk.WatchPort, Actions: acts})
	}
	return m, nil
}

// MeterMod builds the meter mod for one change.
func MeterMod(kind flow.OpKind, e *flowstore.MeterEntry) *openflow.MeterMod {
	m := &openflow.MeterMod{MeterID: e.Global}
	switch kind {
	case flow.OpDelete:
		m.Command = openflow.MeterDelete
		return m
	case flow.OpModify:
		m.Command = openflow.MeterModify
	default:
		m.Command = openflow.MeterAdd
	}
	m.Flags = openflow.MeterKbps
	if e.Meter.Unit == flow.MeterPktps {
		m.Flags = openflow.MeterPktps
	}
	for _, b := range e.Meter.Bands {
		if b.Burst != 0 {
			m.Flags |= openflow.MeterBurst
		}
		m.Bands = append(m.Bands, openflow.MeterBand{Type: 1, Rate: b.Rate, BurstSize: b.Burst})
	}
	return m
}
