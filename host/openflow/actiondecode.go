package openflow

import "net/netip"

// decodeActions decodes a list of actions filling all of r.
func decodeActions(r *reader) ([]Action, error) {
	var out []Action
	for r.left() > 0 {
		a, err := decodeAction(r)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, r.err
}

func decodeAction(r *reader) (Action, error) {
	start := r.off
	typ := r.u16()
	n := int(r.u16())
	if r.err != nil {
		return nil, r.err
	}
	if n < 8 || n%8 != 0 {
		r.off = start
		r.failf(ErrBadLength, "action")
		return nil, r.err
	}
	r.off = start
	sv := r.sub(n, "action")
	s := &sv
	if r.err != nil {
		return nil, r.err
	}
	s.skip(4)
	var a Action
	switch typ {
	case atOutput:
		o := Output{Port: s.u32(), MaxLen: s.u16()}
		if o.Port != PortController || o.MaxLen == 0xffff {
			o.MaxLen = 0
		}
		a = o
	case atGroup:
		a = Group{ID: s.u32()}
	case atPushVLAN:
		a = PushVLAN{EtherType: s.u16()}
	case atPopVLAN:
		a = PopVLAN{}
	case atDecNwTTL:
		a = DecTTL{}
	case atMeter:
		a = Meter{ID: s.u32()}
	case atCopyField:
		nb := s.u16()
		so, do := s.u16(), s.u16()
		s.skip(2)
		src := decodeSubfieldHdr(s, nb)
		dst := decodeSubfieldHdr(s, nb)
		src.Ofs, dst.Ofs = so, do
		a = Move{Src: src, Dst: dst}
	case atSetField:
		f, ok := decodeOXM(s)
		if !ok {
			return nil, s.err
		}
		a = SetField{f.normal()}
	case atVendor:
		if v := s.u32(); v != nxVendor && s.err == nil {
			r.off = start
			r.failf(ErrUnknownType, "experimenter action vendor")
			return nil, r.err
		}
		var err error
		a, err = decodeNX(s)
		if err != nil {
			return nil, err
		}
	default:
		r.off = start
		r.failf(ErrUnknownType, "action type "+string(appendUint(nil, uint64(typ))))
		return nil, r.err
	}
	if s.err != nil {
		return nil, s.err
	}
	return a, nil
}

func port32(p uint16) uint32 {
	if p >= 0xff00 {
		return uint32(p) - 0xff00 + PortMax
	}
	return uint32(p)
}

func decodeNX(s *reader) (Action, error) {
	sub := s.u16()
	switch sub {
	case nxResubmit:
		return Resubmit{Port: port32(s.u16()), Table: TableNone}, s.err
	case nxResubmitT:
		return Resubmit{Port: port32(s.u16()), Table: s.u8()}, s.err
	case nxRegMove:
		nb := s.u16()
		so, do := s.u16(), s.u16()
		src := decodeSubfieldHdr(s, nb)
		dst := decodeSubfieldHdr(s, nb)
		src.Ofs, dst.Ofs = so, do
		return Move{Src: src, Dst: dst}, s.err
	case nxNote:
		return Note{Data: cloneBytes(s.rest())}, s.err
	case nxOutputReg:
		on := s.u16()
		src := decodeSubfieldHdr(s, on&0x3f+1)
		src.Ofs = on >> 6
		return OutputReg{Src: src}, s.err
	case nxConj:
		c := s.u8()
		n := s.u8()
		return Conjunction{Clause: c + 1, NClauses: n, ID: s.u32()}, s.err
	case nxCTClear:
		return CTClear{}, s.err
	case nxTrunc:
		return Output{Port: port32(s.u16()), MaxLen: uint16(s.u32())}, s.err
	case nxLearn:
		l, err := decodeLearn(s)
		return l, err
	case nxNAT:
		n, err := decodeNAT(s)
		return n, err
	case nxCT:
		a := CT{}
		flags := s.u16()
		a.Commit, a.Force = flags&1 != 0, flags&2 != 0
		zsrc := s.u32()
		zv := s.u16()
		if zsrc != 0 {
			f, _, _ := fieldFromHeader(zsrc)
			if !f.valid() {
				s.failf(ErrUnknownType, fmtHeader(zsrc))
				return nil, s.err
			}
			a.ZoneSrc = Subfield{Field: f, Ofs: zv >> 6, Bits: zv&0x3f + 1}
		} else {
			a.Zone = zv
		}
		t := s.u8()
		if t != TableNone {
			a.Recirc, a.Table = true, t
		}
		s.skip(3)
		a.Alg = s.u16()
		inner := s.sub(s.left(), "ct")
		acts, err := decodeActions(&inner)
		if err != nil {
			return nil, err
		}
		if len(acts) > 0 {
			if n, ok := acts[0].(*NAT); ok {
				a.NAT = n
				acts = acts[1:]
			}
		}
		if len(acts) > 0 {
			a.Exec = acts
		}
		return a, s.err
	case nxCtrl2:
		a := Controller{Reason: ReasonAction}
		s.skip(6)
		for s.left() >= 4 {
			ps := s.off
			pt := s.u16()
			pl := int(s.u16())
			if pl < 4 {
				s.failf(ErrBadLength, "controller property")
				return nil, s.err
			}
			v := s.bytes(pl - 4)
			s.skip((8 - pl%8) % 8)
			if s.err != nil {
				return nil, s.err
			}
			switch pt {
			case 0:
				if len(v) >= 2 {
					a.MaxLen = uint16(beUint(v[:2]))
				}
			case 1:
				if len(v) >= 2 {
					a.ID = uint16(beUint(v[:2]))
				}
			case 2:
				if len(v) >= 1 {
					a.Reason = PacketInReason(v[0])
				}
			case 3:
				a.Userdata = cloneBytes(v)
			case 4:
				a.Pause = true
			case 5:
				if len(v) >= 4 {
					a.MeterID = uint32(beUint(v[:4]))
				}
			default:
				s.off = ps
				s.failf(ErrUnknownType, "controller property")
				return nil, s.err
			}
		}
		if a.MaxLen == 0xffff {
			a.MaxLen = 0
		}
		return a, s.err
	}
	s.failf(ErrUnknownType, "Nicira action subtype "+string(appendUint(nil, uint64(sub))))
	return nil, s.err
}

func decodeNAT(s *reader) (*NAT, error) {
	n := &NAT{}
	s.skip(2)
	n.Flags = s.u16()
	p := s.u16()
	if p&3 != 0 && p&12 != 0 || p&2 != 0 && p&1 == 0 || p&8 != 0 && p&4 == 0 {
		s.failf(ErrBadValue, "nat range mixes IPv4 and IPv6 or lacks a minimum")
		return nil, s.err
	}
	if p&1 != 0 {
		n.MinAddr = netip.AddrFrom4([4]byte(padTo(s.bytes(4), 4)))
	}
	if p&2 != 0 {
		n.MaxAddr = netip.AddrFrom4([4]byte(padTo(s.bytes(4), 4)))
	}
	if p&4 != 0 {
		n.MinAddr = netip.AddrFrom16([16]byte(padTo(s.bytes(16), 16)))
	}
	if p&8 != 0 {
		n.MaxAddr = netip.AddrFrom16([16]byte(padTo(s.bytes(16), 16)))
	}
	if p&16 != 0 {
		n.MinPort = s.u16()
	}
	if p&32 != 0 {
		n.MaxPort = s.u16()
	}
	return n, s.err
}

// padTo guarantees length n even when a short read returned nil.
func padTo(b []byte, n int) []byte {
	if len(b) >= n {
		return b
	}
	return make([]byte, n)
}
