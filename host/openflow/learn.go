package openflow

// Learn flags.
const (
	LearnSendFlowRem   uint16 = 1
	LearnDeleteLearned uint16 = 2
)

// LearnSpec kinds.
type LearnKind uint8

const (
	// LearnMatch adds "Dst = Src" (or "Dst = Imm") to the learned flow's match.
	LearnMatch LearnKind = iota
	// LearnLoad adds load:Src->Dst (or load:Imm->Dst) to its actions.
	LearnLoad
	// LearnOutput adds output:Src to its actions.
	LearnOutput
)

// LearnSpec is one flow_mod_spec of a learn action. When Src.Field is
// FieldNone the source is the immediate Imm, Dst.Bits wide.
type LearnSpec struct {
	Kind LearnKind
	Src  Subfield
	Imm  uint64
	Dst  Subfield
}

// Learn adds or refreshes a flow in Table when executed (NXAST_LEARN).
// Session affinity uses it to pin a client to the backend it was sent to.
type Learn struct {
	Table          uint8
	IdleTimeout    uint16
	HardTimeout    uint16
	FinIdleTimeout uint16
	FinHardTimeout uint16
	// Priority 0 is sent as OVS's default, 32768.
	Priority uint16
	Cookie   uint64
	Flags    uint16
	Specs    []LearnSpec
}

func (a Learn) prio() uint16 {
	if a.Priority == 0 {
		return DefaultPriority
	}
	return a.Priority
}

func (a Learn) appendAction(b []byte) ([]byte, error) {
	b, s := beginNX(b, nxLearn)
	b = put16(b, a.IdleTimeout)
	b = put16(b, a.HardTimeout)
	b = put16(b, a.prio())
	b = put64(b, a.Cookie)
	b = put16(b, a.Flags)
	b = put8(b, a.Table)
	b = put8(b, 0)
	b = put16(b, a.FinIdleTimeout)
	b = put16(b, a.FinHardTimeout)
	for _, sp := range a.Specs {
		imm := sp.Src.Field == FieldNone
		var n uint16
		if sp.Kind == LearnOutput || !imm {
			if err := sp.Src.check("learn"); err != nil {
				return b, err
			}
			n = sp.Src.nbits()
		} else {
			n = sp.Dst.nbits()
		}
		if sp.Kind != LearnOutput {
			if err := sp.Dst.check("learn"); err != nil {
				return b, err
			}
			if sp.Dst.nbits() != n {
				return b, encodeError("learn", "source is %d bits but destination %s is %d bits", n, sp.Dst, sp.Dst.nbits())
			}
		}
		h := n & 0x3ff
		if imm {
			h |= 1 << 13
		}
		h |= uint16(sp.Kind) << 11
		b = put16(b, h)
		if imm {
			var v [16]byte
			w := int(n+15) / 16 * 2
			putBE(v[:w], sp.Imm)
			if w > 8 {
				return b, encodeError("learn", "immediate wider than 64 bits")
			}
			b = append(b, v[:w]...)
		} else {
			b = put32(b, sp.Src.Field.oxmHeader(false))
			b = put16(b, sp.Src.Ofs)
		}
		if sp.Kind != LearnOutput {
			b = put32(b, sp.Dst.Field.oxmHeader(false))
			b = put16(b, sp.Dst.Ofs)
		}
	}
	return endAction(b, s), nil
}

func (a Learn) appendText(b []byte) []byte {
	b = appendUint(append(b, "learn(table="...), uint64(a.Table))
	if a.IdleTimeout != 0 {
		b = appendUint(append(b, ",idle_timeout="...), uint64(a.IdleTimeout))
	}
	if a.HardTimeout != 0 {
		b = appendUint(append(b, ",hard_timeout="...), uint64(a.HardTimeout))
	}
	if a.FinIdleTimeout != 0 {
		b = appendUint(append(b, ",fin_idle_timeout="...), uint64(a.FinIdleTimeout))
	}
	if a.FinHardTimeout != 0 {
		b = appendUint(append(b, ",fin_hard_timeout="...), uint64(a.FinHardTimeout))
	}
	if a.prio() != DefaultPriority {
		b = appendUint(append(b, ",priority="...), uint64(a.Priority))
	}
	if a.Flags&LearnSendFlowRem != 0 {
		b = append(b, ",send_flow_rem"...)
	}
	if a.Flags&LearnDeleteLearned != 0 {
		b = append(b, ",delete_learned"...)
	}
	if a.Cookie != 0 {
		b = appendHex(append(b, ",cookie="...), a.Cookie)
	}
	for _, sp := range a.Specs {
		b = append(b, ',')
		imm := sp.Src.Field == FieldNone
		switch {
		case sp.Kind == LearnMatch && imm:
			if sp.Dst.Ofs == 0 && int(sp.Dst.nbits()) == sp.Dst.Field.Bits() {
				b = append(append(b, fields[sp.Dst.Field].name...), '=')
				mf := Exact(sp.Dst.Field, sp.Imm)
				b = appendFieldValue(b, &mf, true)
			} else {
				b = append(sp.Dst.appendText(b), '=')
				b = appendImmHex(b, sp.Imm)
			}
		case sp.Kind == LearnMatch:
			b = sp.Dst.appendText(b)
			if sp.Src.Field != sp.Dst.Field || sp.Src.Ofs != sp.Dst.Ofs {
				b = sp.Src.appendText(append(b, '='))
			}
		case sp.Kind == LearnLoad && imm:
			b = appendImmHex(append(b, "load:"...), sp.Imm)
			b = sp.Dst.appendText(append(b, "->"...))
		case sp.Kind == LearnLoad:
			b = sp.Src.appendText(append(b, "load:"...))
			b = sp.Dst.appendText(append(b, "->"...))
		default:
			b = sp.Src.appendText(append(b, "output:"...))
		}
	}
	return append(b, ')')
}

// appendImmHex prints an immediate as OVS's ds_put_hex does: hex with
// leading zero bytes dropped, "0" for zero.
func appendImmHex(b []byte, v uint64) []byte { return appendAltHex(b, v) }

func (a Learn) String() string { return string(a.appendText(nil)) }

func decodeLearn(r *reader) (Learn, error) {
	var a Learn
	a.IdleTimeout = r.u16()
	a.HardTimeout = r.u16()
	a.Priority = r.u16()
	a.Cookie = r.u64()
	a.Flags = r.u16()
	a.Table = r.u8()
	r.skip(1)
	a.FinIdleTimeout = r.u16()
	a.FinHardTimeout = r.u16()
	if a.Priority == DefaultPriority {
		a.Priority = 0
	}
	for r.left() >= 2 {
		h := r.u16()
		if h == 0 {
			break // padding
		}
		n := h & 0x3ff
		imm := h&(1<<13) != 0
		sp := LearnSpec{Kind: LearnKind(h >> 11 & 3)}
		if sp.Kind > LearnOutput {
			r.failf(ErrBadValue, "learn spec destination type")
			break
		}
		if imm {
			w := int(n+15) / 16 * 2
			v := r.bytes(w)
			if w > 8 {
				r.failf(ErrUnknownType, "learn immediate wider than 64 bits")
				break
			}
			sp.Imm = beUint(v)
		} else {
			sp.Src = decodeSubfieldHdr(r, n)
			sp.Src.Ofs = r.u16()
		}
		if sp.Kind != LearnOutput {
			sp.Dst = decodeSubfieldHdr(r, n)
			sp.Dst.Ofs = r.u16()
		}
		if r.err != nil {
			break
		}
		a.Specs = append(a.Specs, sp)
	}
	return a, r.err
}

func decodeSubfieldHdr(r *reader, nbits uint16) Subfield {
	h := r.u32()
	if r.err != nil {
		return Subfield{}
	}
	f, _, _ := fieldFromHeader(h)
	if !f.valid() {
		r.failf(ErrUnknownType, fmtHeader(h))
		return Subfield{}
	}
	return Subfield{Field: f, Bits: nbits}
}
