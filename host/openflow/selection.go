package openflow

import "bytes"

// GroupSelection is a select group's selection method, OVS's Netronome
// extension group property (NTRT_SELECTION_METHOD): Method "hash" hashes
// Fields of each packet to pick a bucket, "dp_hash" hashes in the
// datapath. Param is the method's optional parameter (a hash basis).
type GroupSelection struct {
	Method string
	Param  uint64
	Fields []Field
}

const (
	ntrVendor           uint32 = 0x0000154d
	ntrSelectionMethod  uint32 = 1
	groupPropExperiment uint16 = 0xffff
	maxSelectionMethod         = 16 // NUL included
)

// appendGroupProps appends the group properties that follow the buckets
// of an OpenFlow 1.5 group mod or group desc.
func appendGroupProps(b []byte, s *GroupSelection) ([]byte, error) {
	if s == nil {
		return b, nil
	}
	if len(s.Method) >= maxSelectionMethod || s.Method == "" {
		return b, encodeError("group selection method", "method %q must be 1..15 bytes", s.Method)
	}
	start := len(b)
	b = put16(b, groupPropExperiment)
	b = put16(b, 0)
	b = put32(b, ntrVendor)
	b = put32(b, ntrSelectionMethod)
	b = zeros(b, 4)
	var name [maxSelectionMethod]byte
	copy(name[:], s.Method)
	b = append(b, name[:]...)
	b = put64(b, s.Param)
	for _, f := range s.Fields {
		if !f.valid() {
			return b, encodeError("group selection method", "unknown field %d", f)
		}
		// Each field is an OXM TLV whose value says which bits to hash:
		// all of them.
		b = put32(b, f.oxmHeader(false))
		for range f.Size() {
			b = append(b, 0xff)
		}
	}
	setLen16(b, start+2, len(b)-start)
	return pad8(b, start), nil
}

// decodeGroupProps reads the properties after the buckets; it keeps the
// selection method and skips the rest.
func decodeGroupProps(r *reader) *GroupSelection {
	var sel *GroupSelection
	for r.left() >= 4 && r.err == nil {
		typ := r.u16()
		n := int(r.u16())
		if n < 4 || n-4 > r.left() {
			r.failf(ErrBadLength, "group property")
			return nil
		}
		p := r.sub(n-4, "group property")
		r.skip(min((8-n%8)%8, r.left()))
		if typ != groupPropExperiment || n < 40 || p.u32() != ntrVendor || p.u32() != ntrSelectionMethod {
			continue
		}
		p.skip(4)
		name := p.bytes(maxSelectionMethod)
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		sel = &GroupSelection{Method: string(name), Param: p.u64()}
		for p.left() >= 4 {
			f, _, n := fieldFromHeader(p.u32())
			if !f.valid() {
				r.failf(ErrUnknownType, "group selection field")
				return nil
			}
			p.skip(n) // the bits hashed; Fields means all of them
			sel.Fields = append(sel.Fields, f)
		}
		if p.err != nil {
			r.failf(ErrBadLength, "group selection fields")
			return nil
		}
	}
	return sel
}

// selectionFieldRank is the order OVS prints selection fields in (its
// internal field order), which differs from the Field constants'.
var selectionFieldRank = map[Field]int{
	FieldEthSrc: 1, FieldEthDst: 2, FieldEthType: 3, FieldVLANVID: 4, FieldIPv4Src: 5, FieldIPv4Dst: 6,
	FieldIPv6Src: 7, FieldIPv6Dst: 8, FieldIPProto: 9, FieldTCPSrc: 10, FieldTCPDst: 11,
	FieldUDPSrc: 12, FieldUDPDst: 13, FieldSCTPSrc: 14, FieldSCTPDst: 15,
}

func (s *GroupSelection) appendText(b []byte) []byte {
	b = append(append(b, ",selection_method="...), s.Method...)
	if s.Param != 0 {
		b = appendUint(append(b, ",selection_method_param="...), s.Param)
	}
	fs := append([]Field(nil), s.Fields...)
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && selectionFieldRank[fs[j]] < selectionFieldRank[fs[j-1]]; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
	switch len(fs) {
	case 0:
		return b
	case 1:
		return append(append(b, ",fields="...), fields[fs[0]].name...)
	}
	b = append(b, ",fields("...)
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, fields[f].name...)
	}
	return append(b, ')')
}
