package ofxlate

// The reverse translation: a flow as the switch holds it (decoded from a
// flow stats reply) back into the SDK terms of the plugin that owns it,
// with symbolic table names and the plugin's named register fields. It is
// what Host.Flows returns, and what podnet's CNI CHECK compares with the
// flows it meant to install.

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Reverse is what reading a switch flow back into one plugin's terms
// needs: the plugin, its register fields (its own and the well-known
// ones), its cookie prefix and the table names.
type Reverse struct {
	Owner  string
	Prefix uint16
	Fields map[string]flow.Bits
	// Table names a table ID; ok is false for an unassigned ID.
	Table func(id uint8) (name string, ok bool)

	byBits map[flow.Bits]flow.Field
	byKind map[openflow.Field]flow.MatchKind
}

func (r *Reverse) init() {
	if r.byBits != nil {
		return
	}
	r.byBits = make(map[flow.Bits]flow.Field, len(r.Fields))
	for name, b := range r.Fields {
		r.byBits[b] = flow.Field{Name: name, Width: b.Width}
	}
	r.byKind = make(map[openflow.Field]flow.MatchKind, len(matchFields))
	for k, f := range matchFields {
		r.byKind[f] = k
	}
}

func regNum(f openflow.Field) (uint8, bool) {
	if f >= openflow.FieldReg0 && f <= openflow.FieldReg0+15 {
		return uint8(f - openflow.FieldReg0), true
	}
	return 0, false
}

// field finds the plugin field at exactly reg[ofs .. ofs+width-1].
func (r *Reverse) field(reg uint8, ofs, width int) (flow.Field, error) {
	f, ok := r.byBits[flow.Bits{Reg: reg, Offset: uint8(ofs), Width: uint8(width)}]
	if !ok {
		return flow.Field{}, fmt.Errorf("%w: plugin %q: reg%d[%d..%d] is no register field of the plugin", sdk.ErrUnallocatedField, r.Owner, reg, ofs, ofs+width-1)
	}
	return f, nil
}

func (r *Reverse) tableName(id uint8) (string, error) {
	if n, ok := r.Table(id); ok {
		return n, nil
	}
	return "", fmt.Errorf("%w: plugin %q: table ID %d is not assigned", sdk.ErrUnknownTable, r.Owner, id)
}

// matchBuilder collects match fields with their bytes in one arena, so a
// read-back match costs a couple of allocations rather than one per field.
type matchBuilder struct {
	fields []flow.MatchField
	arena  []byte
}

func (b *matchBuilder) bytes(v []byte) []byte {
	start := len(b.arena)
	b.arena = append(b.arena, v...)
	return b.arena[start:len(b.arena):len(b.arena)]
}

func (b *matchBuilder) u32(v uint32) []byte {
	var x [4]byte
	binary.BigEndian.PutUint32(x[:], v)
	return b.bytes(x[:])
}

// regMatch splits a register match into the plugin's fields it covers.
func (r *Reverse) regMatch(mb *matchBuilder, reg uint8, v, mask uint32) error {
	left := mask
	for b, f := range r.byBits {
		if b.Reg != reg || b.Mask()&mask == 0 {
			continue
		}
		full := b.Mask() >> b.Offset
		sub := (mask & b.Mask()) >> b.Offset
		val := (v & b.Mask()) >> b.Offset
		mf := flow.MatchField{Kind: flow.MatchRegField, Field: f, Value: mb.u32(val & sub)}
		if sub != full {
			mf.Mask = mb.u32(sub)
		}
		mb.fields = append(mb.fields, mf)
		left &^= b.Mask()
	}
	if left != 0 {
		return fmt.Errorf("%w: plugin %q: match on reg%d bits %#x, which are no register field of the plugin", sdk.ErrUnallocatedField, r.Owner, reg, left)
	}
	return nil
}

// FromMatch translates a switch match into the plugin's terms.
func (r *Reverse) FromMatch(om openflow.Match) (flow.Match, error) {
	r.init()
	mb := &matchBuilder{fields: make([]flow.MatchField, 0, len(om)+2), arena: make([]byte, 0, 16*len(om))}
	for _, of := range om {
		if reg, ok := regNum(of.Field); ok {
			if err := r.regMatch(mb, reg, uint32(of.Uint64()), uint32(of.MaskUint64())); err != nil {
				return flow.Match{}, err
			}
			continue
		}
		k, ok := r.byKind[of.Field]
		if !ok {
			return flow.Match{}, fmt.Errorf("%w: plugin %q: the switch holds a match on %s, which the SDK has no name for", sdk.ErrInvalid, r.Owner, of.Field)
		}
		n := k.Size()
		mf := flow.MatchField{Kind: k, Value: mb.bytes(of.Value[:n])}
		if k == flow.MatchVlanVID {
			// The OpenFlow "tag present" bit is implied by the SDK match.
			mf.Value[0] &^= 0x10
		}
		if of.Masked {
			mf.Mask = mb.bytes(of.Mask[:n])
		}
		mb.fields = append(mb.fields, mf)
	}
	// The canonical order (kind, then field name), so MatchOf takes the
	// slice as it is.
	slices.SortFunc(mb.fields, func(a, b flow.MatchField) int {
		if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return cmp.Compare(a.Field.Name, b.Field.Name)
	})
	return flow.MatchOf(mb.fields...), nil
}

func (r *Reverse) subfield(s openflow.Subfield) (flow.Field, error) {
	reg, ok := regNum(s.Field)
	if !ok {
		return flow.Field{}, fmt.Errorf("%w: plugin %q: %s is not a register", sdk.ErrInvalid, r.Owner, s.Field)
	}
	return r.field(reg, int(s.Ofs), int(s.Bits))
}

// setField turns a set_field back into the SDK's setter for that header.
func (r *Reverse) setField(sf openflow.SetField) (flow.Action, error) {
	// none is the zero Action, whatever its representation.
	var none flow.Action
	of := sf.MatchField
	if reg, ok := regNum(of.Field); ok {
		mask := uint32(of.MaskUint64())
		for b, f := range r.byBits {
			if b.Reg == reg && b.Mask() == mask {
				return flow.LoadField(f, uint32(of.Uint64())>>b.Offset), nil
			}
		}
		return none, fmt.Errorf("%w: plugin %q: load into reg%d bits %#x, which are no register field of the plugin", sdk.ErrUnallocatedField, r.Owner, reg, mask)
	}
	if of.Masked {
		return none, fmt.Errorf("%w: plugin %q: masked set_field of %s has no SDK form", sdk.ErrInvalid, r.Owner, of.Field)
	}
	mac := func() net.HardwareAddr { return of.MAC() }
	ip4 := func() netip.Addr { return netip.AddrFrom4([4]byte(of.Value[:4])) }
	switch r.byKind[of.Field] {
	case flow.MatchEthSrc:
		return flow.SetEthSrc(mac()), nil
	case flow.MatchEthDst:
		return flow.SetEthDst(mac()), nil
	case flow.MatchIPv4Src:
		return flow.SetIPv4Src(ip4()), nil
	case flow.MatchIPv4Dst:
		return flow.SetIPv4Dst(ip4()), nil
	case flow.MatchTunDst:
		return flow.SetTunDst(ip4()), nil
	case flow.MatchTunID:
		return flow.SetTunID(of.Uint64()), nil
	case flow.MatchARPOp:
		return flow.SetARPOp(uint16(of.Uint64())), nil
	case flow.MatchARPSha:
		return flow.SetARPSha(mac()), nil
	case flow.MatchARPTha:
		return flow.SetARPTha(mac()), nil
	case flow.MatchARPSpa:
		return flow.SetARPSpa(ip4()), nil
	case flow.MatchARPTpa:
		return flow.SetARPTpa(ip4()), nil
	case flow.MatchVlanVID:
		return flow.SetVlanVID(uint16(of.Uint64()) & 0xfff), nil
	}
	return none, fmt.Errorf("%w: plugin %q: set_field of %s has no SDK form", sdk.ErrInvalid, r.Owner, of.Field)
}

// FromActions translates a switch action list into the plugin's terms.
func (r *Reverse) FromActions(as []openflow.Action) ([]flow.Action, error) {
	r.init()
	out := make([]flow.Action, 0, len(as))
	for _, oa := range as {
		var a flow.Action
		var err error
		switch x := oa.(type) {
		case openflow.Output:
			switch x.Port {
			case openflow.PortInPort:
				a = flow.OutputInPort()
			case openflow.PortNormal:
				a = flow.Normal()
			default:
				a = flow.Output(x.Port)
			}
		case openflow.OutputReg:
			var f flow.Field
			if f, err = r.subfield(x.Src); err == nil {
				a = flow.OutputField(f)
			}
		case openflow.Conjunction:
			a = flow.Conjunction(x.ID, x.Clause, x.NClauses)
		case openflow.Controller:
			// The codec leaves max_len out when it is the whole packet, and
			// reads an absent one back as 0.
			maxLen := x.MaxLen
			if maxLen == 0 {
				maxLen = 0xffff
			}
			a = flow.Controller(maxLen, x.Userdata)
		case openflow.SetField:
			a, err = r.setField(x)
		case openflow.Move:
			var src, dst flow.Field
			if src, err = r.subfield(x.Src); err == nil {
				if dst, err = r.subfield(x.Dst); err == nil {
					a = flow.MoveField(src, dst)
				}
			}
		case openflow.CT:
			ct := flow.CT{Commit: x.Commit, Zone: x.Zone, NAT: reverseNAT(x.NAT)}
			if x.Recirc {
				var name string
				if name, err = r.tableName(x.Table); err != nil {
					return nil, err
				}
				ct.Resume = flow.GotoTable(name)
			}
			for _, e := range x.Exec {
				if sf, ok := e.(openflow.SetField); ok && sf.Field == openflow.FieldCTMark {
					ct.Mark, ct.MarkMask = uint32(sf.Uint64()), uint32(sf.MaskUint64())
					continue
				}
				return nil, fmt.Errorf("%w: plugin %q: ct exec action %s has no SDK form", sdk.ErrInvalid, r.Owner, e)
			}
			a = flow.Conntrack(ct)
		case openflow.Group:
			if x.ID>>24 != uint32(r.Prefix) {
				return nil, fmt.Errorf("%w: plugin %q: group %d is not in the plugin's share", sdk.ErrNotOwner, r.Owner, x.ID)
			}
			a = flow.ApplyGroup(x.ID & 0xffffff)
		case openflow.Meter:
			if x.ID>>10 != uint32(r.Prefix) {
				return nil, fmt.Errorf("%w: plugin %q: meter %d is not in the plugin's share", sdk.ErrNotOwner, r.Owner, x.ID)
			}
			a = flow.ApplyMeter(x.ID & 0x3ff)
		case openflow.DecTTL:
			a = flow.DecTTL()
		case openflow.PushVLAN:
			a = flow.PushVLAN(x.EtherType)
		case openflow.PopVLAN:
			a = flow.PopVLAN()
		default:
			err = fmt.Errorf("%w: plugin %q: action %s has no SDK form", sdk.ErrInvalid, r.Owner, oa)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// FromFlow translates one switch flow of the plugin. The Tag is the low
// 32 bits of the cookie; jumps come back as GotoTable of the resolved
// table, whichever way the plugin wrote them.
func (r *Reverse) FromFlow(of *openflow.Flow) (*flow.Flow, error) {
	r.init()
	table, err := r.tableName(of.Table)
	if err != nil {
		return nil, err
	}
	_, _, tag := pipeline.SplitCookie(of.Cookie)
	f := &flow.Flow{Table: table, Priority: of.Priority, Tag: tag, IdleTimeout: of.IdleTimeout, HardTimeout: of.HardTimeout}
	if f.Match, err = r.FromMatch(of.Match); err != nil {
		return nil, fmt.Errorf("flow in table %q: %w", table, err)
	}
	for _, in := range of.Instructions {
		switch x := in.(type) {
		case openflow.ApplyActions:
			if f.Actions, err = r.FromActions(x.Actions); err != nil {
				return nil, fmt.Errorf("flow in table %q: %w", table, err)
			}
		case openflow.GotoTable:
			name, err := r.tableName(x.Table)
			if err != nil {
				return nil, err
			}
			f.Goto = flow.GotoTable(name)
		default:
			return nil, fmt.Errorf("%w: plugin %q: flow in table %q: instruction %T has no SDK form", sdk.ErrInvalid, r.Owner, table, in)
		}
	}
	return f, nil
}

// reverseNAT is the inverse of nat.
func reverseNAT(n *openflow.NAT) *flow.NAT {
	if n == nil {
		return nil
	}
	out := &flow.NAT{MinAddr: n.MinAddr, MaxAddr: n.MaxAddr, MinPort: n.MinPort, MaxPort: n.MaxPort,
		Persistent: n.Flags&openflow.NATPersistent != 0}
	switch {
	case n.Flags&openflow.NATSrc != 0:
		out.Kind = flow.NATSrc
	case n.Flags&openflow.NATDst != 0:
		out.Kind = flow.NATDst
	}
	switch {
	case n.Flags&openflow.NATProtoHash != 0:
		out.Selection = flow.NATHash
	case n.Flags&openflow.NATRandom != 0:
		out.Selection = flow.NATRandom
	}
	return out
}
