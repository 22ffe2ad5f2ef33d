package openflow

import (
	"net/netip"
)

// nxtCTFlush is NXT_CT_FLUSH (Open vSwitch 3.1 and later).
const nxtCTFlush uint32 = 32

// Property types of NXT_CT_FLUSH: the outer ones, and those nested in a
// tuple.
const (
	ctFlushOrig    uint16 = 0
	ctFlushReply   uint16 = 1
	ctFlushZone    uint16 = 2
	ctTupleSrc     uint16 = 0
	ctTupleDst     uint16 = 1
	ctTupleSrcPort uint16 = 2
	ctTupleDstPort uint16 = 3
)

// CTTuple is one direction of the connections a CTFlush removes. Zero
// fields match anything: a tuple with only Src and SrcPort removes every
// connection whose (reply) source is that address and port.
type CTTuple struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

func (t CTTuple) empty() bool { return t == CTTuple{} }

// CTFlush removes the conntrack entries of Zone (and, when set, of
// Protocol) that match Orig in the original direction and Reply in the
// reply direction (NXT_CT_FLUSH): the whole zone when both are empty.
type CTFlush struct {
	Zone     uint16
	Protocol uint8
	Orig     CTTuple
	Reply    CTTuple
}

func (m *CTFlush) msgType() uint8 { return typeExperimenter }
func (m *CTFlush) appendBody(b []byte) ([]byte, error) {
	b = beginNXT(b, nxtCTFlush)
	b = put8(b, m.Protocol)
	b = zeros(b, 7) // family (unspecified: the addresses say) and padding
	if !m.Orig.empty() {
		b = appendCTTuple(b, ctFlushOrig, m.Orig)
	}
	if !m.Reply.empty() {
		b = appendCTTuple(b, ctFlushReply, m.Reply)
	}
	return appendCTProp(b, ctFlushZone, put16(nil, m.Zone)), nil
}

// appendCTProp appends one property: type, length (without padding),
// value, padding to 8 bytes. 16-bit values travel in 4 bytes, as Open
// vSwitch puts them.
func appendCTProp(b []byte, typ uint16, v []byte) []byte {
	if len(v) == 2 {
		v = append(v, 0, 0)
	}
	start := len(b)
	b = put16(put16(b, typ), uint16(4+len(v)))
	b = append(b, v...)
	return pad8(b, start)
}

func appendCTTuple(b []byte, typ uint16, t CTTuple) []byte {
	// A nested property's contents start 8-aligned: 4 bytes of padding
	// after its header.
	in := make([]byte, 4, 68)
	addr := func(p uint16, a netip.Addr) {
		if a.IsValid() {
			x := a.As16() // IPv4 travels mapped
			in = appendCTProp(in, p, x[:])
		}
	}
	addr(ctTupleSrc, t.Src)
	addr(ctTupleDst, t.Dst)
	if t.SrcPort != 0 {
		in = appendCTProp(in, ctTupleSrcPort, put16(nil, t.SrcPort))
	}
	if t.DstPort != 0 {
		in = appendCTProp(in, ctTupleDstPort, put16(nil, t.DstPort))
	}
	return appendCTProp(b, typ, in)
}

func decodeCTFlush(r *reader) (Message, error) {
	m := &CTFlush{Protocol: r.u8()}
	r.skip(7)
	for r.err == nil && r.left() > 0 {
		typ, val := ctProp(r)
		switch typ {
		case ctFlushOrig, ctFlushReply:
			t := decodeCTTuple(r, val)
			if typ == ctFlushOrig {
				m.Orig = t
			} else {
				m.Reply = t
			}
		case ctFlushZone:
			if len(val) >= 2 {
				m.Zone = uint16(val[0])<<8 | uint16(val[1])
			}
		}
	}
	return m, r.err
}

// ctProp reads one property and its padding.
func ctProp(r *reader) (uint16, []byte) {
	typ, n := r.u16(), int(r.u16())
	if r.err != nil {
		return 0, nil
	}
	if n < 4 {
		r.fail(ErrBadLength)
		return 0, nil
	}
	v := r.bytes(n - 4)
	if pad := (8 - n%8) % 8; r.left() >= pad {
		r.skip(pad)
	}
	return typ, v
}

func decodeCTTuple(parent *reader, b []byte) CTTuple {
	r := reader{b: b, ctx: "ct tuple", parent: parent}
	r.skip(4)
	var t CTTuple
	for r.err == nil && r.left() > 0 {
		typ, v := ctProp(&r)
		switch {
		case (typ == ctTupleSrc || typ == ctTupleDst) && len(v) == 16:
			a := netip.AddrFrom16([16]byte(v)).Unmap()
			if typ == ctTupleSrc {
				t.Src = a
			} else {
				t.Dst = a
			}
		case (typ == ctTupleSrcPort || typ == ctTupleDstPort) && len(v) >= 2:
			p := uint16(v[0])<<8 | uint16(v[1])
			if typ == ctTupleSrcPort {
				t.SrcPort = p
			} else {
				t.DstPort = p
			}
		}
	}
	if r.err != nil {
		parent.fail(r.err)
	}
	return t
}
