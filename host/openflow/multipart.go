package openflow

// Multipart types (OpenFlow 1.5 numbering).
const (
	mpFlowDesc   uint16 = 1
	mpGroupDesc  uint16 = 7
	mpMeterStats uint16 = 9
	mpPortDesc   uint16 = 13
)

// MultipartMore is set in a reply's Flags when more replies follow.
const MultipartMore uint16 = 1

func beginMultipart(b []byte, typ, flags uint16) []byte {
	b = put16(b, typ)
	b = put16(b, flags)
	return zeros(b, 4)
}

// FlowStatsRequest asks for the flows in Table (TableAll: every table)
// whose cookie matches Cookie under CookieMask and whose match is a
// superset of Match (OFPMP_FLOW_DESC).
type FlowStatsRequest struct {
	Table      uint8
	OutPort    uint32 // 0: any
	OutGroup   uint32 // 0: any
	Cookie     uint64
	CookieMask uint64
	Match      Match
}

func (m *FlowStatsRequest) msgType() uint8 { return typeMultipartReq }
func (m *FlowStatsRequest) appendBody(b []byte) ([]byte, error) {
	b = beginMultipart(b, mpFlowDesc, 0)
	b = put8(b, m.Table)
	b = zeros(b, 3)
	op, og := m.OutPort, m.OutGroup
	if op == 0 {
		op = PortAny
	}
	if og == 0 {
		og = 0xffffffff
	}
	b = put32(b, op)
	b = put32(b, og)
	b = zeros(b, 4)
	b = put64(b, m.Cookie)
	b = put64(b, m.CookieMask)
	return appendMatch(b, m.Match), nil
}

// FlowStats is one flow in a flow stats reply.
type FlowStats struct {
	Flow         Flow
	DurationSec  uint32
	DurationNsec uint32
	PacketCount  uint64
	ByteCount    uint64
}

// FlowStatsReply is one part of the answer to FlowStatsRequest. Conn
// joins the parts.
type FlowStatsReply struct {
	Flags uint16
	Flows []FlowStats
}

func (m *FlowStatsReply) msgType() uint8 { return typeMultipartReply }
func (m *FlowStatsReply) appendBody(b []byte) ([]byte, error) {
	b = beginMultipart(b, mpFlowDesc, m.Flags)
	var err error
	for i := range m.Flows {
		fs := &m.Flows[i]
		f := &fs.Flow
		start := len(b)
		b = put16(b, 0)
		b = zeros(b, 2)
		b = put8(b, f.Table)
		b = put8(b, 0)
		b = put16(b, f.Priority)
		b = put16(b, f.IdleTimeout)
		b = put16(b, f.HardTimeout)
		b = put16(b, uint16(f.Flags))
		b = put16(b, f.Importance)
		b = put64(b, f.Cookie)
		b = appendMatch(b, f.Match)
		b = appendStats(b, fs.DurationSec, fs.DurationNsec, fs.PacketCount, fs.ByteCount)
		if b, err = appendInstructions(b, f.Instructions); err != nil {
			return b, err
		}
		setLen16(b, start, len(b)-start)
	}
	return b, nil
}

func decodeFlowDesc(r *reader) (FlowStats, error) {
	var fs FlowStats
	start := r.off
	n := int(r.u16())
	if r.err == nil && (n < 24 || n > len(r.b)-start) {
		r.failf(ErrBadLength, "flow desc")
		return fs, r.err
	}
	r.off = start
	sv := r.sub(n, "flow desc")
	s := &sv
	s.skip(4)
	f := &fs.Flow
	f.Table = s.u8()
	s.skip(1)
	f.Priority = s.u16()
	f.IdleTimeout = s.u16()
	f.HardTimeout = s.u16()
	f.Flags = FlowFlags(s.u16())
	f.Importance = s.u16()
	f.Cookie = s.u64()
	var err error
	if f.Match, err = decodeMatch(s); err != nil {
		return fs, err
	}
	if fs.DurationSec, fs.DurationNsec, fs.PacketCount, fs.ByteCount, err = decodeStats(s); err != nil {
		return fs, err
	}
	ins := s.sub(s.left(), "instructions")
	if f.Instructions, err = decodeInstructions(&ins); err != nil {
		return fs, err
	}
	return fs, s.err
}

// PortDescRequest asks for every port's description.
type PortDescRequest struct{}

func (m *PortDescRequest) msgType() uint8 { return typeMultipartReq }
func (m *PortDescRequest) appendBody(b []byte) ([]byte, error) {
	b = beginMultipart(b, mpPortDesc, 0)
	b = put32(b, PortAny)
	return zeros(b, 4), nil
}

// PortDescReply lists ports.
type PortDescReply struct {
	Flags uint16
	Ports []Port
}

func (m *PortDescReply) msgType() uint8 { return typeMultipartReply }
func (m *PortDescReply) appendBody(b []byte) ([]byte, error) {
	b = beginMultipart(b, mpPortDesc, m.Flags)
	for i := range m.Ports {
		b = appendPortDesc(b, &m.Ports[i])
	}
	return b, nil
}

// GroupDescRequest asks for group descriptions (GroupAll: every group).
type GroupDescRequest struct{ GroupID uint32 }

// GroupAll addresses every group.
const GroupAll uint32 = 0xfffffffc

func (m *GroupDescRequest) msgType() uint8 { return typeMultipartReq }
func (m *GroupDescRequest) appendBody(b []byte) ([]byte, error) {
	b = beginMultipart(b, mpGroupDesc, 0)
	b = put32(b, m.GroupID)
	return zeros(b, 4), nil
}

// GroupDescReply lists groups.
type GroupDescReply struct {
	Flags  uint16
	Groups []GroupDesc
}

// GroupDesc is one group in a GroupDescReply.
type GroupDesc struct {
	Type      GroupType
	GroupID   uint32
	Buckets   []Bucket
	Selection *GroupSelection
}

func (m *GroupDescReply) msgType() uint8 { return typeMultipartReply }
func (m *GroupDescReply) appendBody(b []byte) ([]byte, error) {
	b = beginMultipart(b, mpGroupDesc, m.Flags)
	for _, g := range m.Groups {
		start := len(b)
		b = put16(b, 0)
		b = put8(b, uint8(g.Type))
		b = put8(b, 0)
		b = put32(b, g.GroupID)
		bl := len(b)
		b = put16(b, 0)
		b = zeros(b, 6)
		bs := len(b)
		var err error
		b, err = appendBuckets(b, g.Buckets)
		if err != nil {
			return b, err
		}
		setLen16(b, bl, len(b)-bs)
		if b, err = appendGroupProps(b, g.Selection); err != nil {
			return b, err
		}
		setLen16(b, start, len(b)-start)
	}
	return b, nil
}

// MeterStatsRequest asks for meter statistics (MeterAll: every meter).
type MeterStatsRequest struct{ MeterID uint32 }

// MeterAll addresses every meter.
const MeterAll uint32 = 0xffffffff

func (m *MeterStatsRequest) msgType() uint8 { return typeMultipartReq }
func (m *MeterStatsRequest) appendBody(b []byte) ([]byte, error) {
	b = beginMultipart(b, mpMeterStats, 0)
	b = put32(b, m.MeterID)
	return zeros(b, 4), nil
}

// MeterStats is the statistics of one meter.
type MeterStats struct {
	MeterID       uint32
	FlowCount     uint32
	PacketInCount uint64
	ByteInCount   uint64
	DurationSec   uint32
	DurationNsec  uint32
	Bands         []MeterBandStats
}

// MeterBandStats counts what one band acted on.
type MeterBandStats struct{ PacketCount, ByteCount uint64 }

// MeterStatsReply lists meter statistics.
type MeterStatsReply struct {
	Flags  uint16
	Meters []MeterStats
}

func (m *MeterStatsReply) msgType() uint8 { return typeMultipartReply }
func (m *MeterStatsReply) appendBody(b []byte) ([]byte, error) {
	b = beginMultipart(b, mpMeterStats, m.Flags)
	for _, s := range m.Meters {
		b = put32(b, s.MeterID)
		b = put16(b, uint16(40+16*len(s.Bands)))
		b = zeros(b, 6)
		b = put32(b, s.FlowCount)
		b = put64(b, s.PacketInCount)
		b = put64(b, s.ByteInCount)
		b = put32(b, s.DurationSec)
		b = put32(b, s.DurationNsec)
		for _, bs := range s.Bands {
			b = put64(b, bs.PacketCount)
			b = put64(b, bs.ByteCount)
		}
	}
	return b, nil
}

// MultipartUnknown is a multipart message of a type not modelled here.
type MultipartUnknown struct {
	Reply  bool
	MPType uint16
	Flags  uint16
	Body   []byte
}

func (m *MultipartUnknown) msgType() uint8 {
	if m.Reply {
		return typeMultipartReply
	}
	return typeMultipartReq
}
func (m *MultipartUnknown) appendBody(b []byte) ([]byte, error) {
	return append(beginMultipart(b, m.MPType, m.Flags), m.Body...), nil
}

func decodeMultipartRequest(r *reader) (Message, error) {
	typ := r.u16()
	flags := r.u16()
	r.skip(4)
	if r.err != nil {
		return nil, r.err
	}
	switch typ {
	case mpFlowDesc:
		m := &FlowStatsRequest{Table: r.u8()}
		r.skip(3)
		m.OutPort, m.OutGroup = r.u32(), r.u32()
		if m.OutPort == PortAny {
			m.OutPort = 0
		}
		if m.OutGroup == 0xffffffff {
			m.OutGroup = 0
		}
		r.skip(4)
		m.Cookie, m.CookieMask = r.u64(), r.u64()
		var err error
		if m.Match, err = decodeMatch(r); err != nil {
			return nil, err
		}
		return m, r.err
	case mpPortDesc:
		return &PortDescRequest{}, nil
	case mpGroupDesc:
		return &GroupDescRequest{GroupID: r.u32()}, r.err
	case mpMeterStats:
		return &MeterStatsRequest{MeterID: r.u32()}, r.err
	case mpGroupStats:
		return &GroupStatsRequest{GroupID: r.u32()}, r.err
	}
	return &MultipartUnknown{MPType: typ, Flags: flags, Body: cloneBytes(r.rest())}, nil
}

func decodeMultipartReply(r *reader) (Message, error) {
	typ := r.u16()
	flags := r.u16()
	r.skip(4)
	if r.err != nil {
		return nil, r.err
	}
	switch typ {
	case mpFlowDesc:
		m := &FlowStatsReply{Flags: flags}
		for r.left() > 0 {
			fs, err := decodeFlowDesc(r)
			if err != nil {
				return nil, err
			}
			m.Flows = append(m.Flows, fs)
		}
		return m, r.err
	case mpPortDesc:
		m := &PortDescReply{Flags: flags}
		for r.left() > 0 {
			p, err := decodePortDesc(r)
			if err != nil {
				return nil, err
			}
			m.Ports = append(m.Ports, p)
		}
		return m, r.err
	case mpGroupDesc:
		m := &GroupDescReply{Flags: flags}
		for r.left() > 0 {
			start := r.off
			n := int(r.u16())
			if r.err == nil && (n < 16 || n > len(r.b)-start) {
				r.failf(ErrBadLength, "group desc")
				return nil, r.err
			}
			r.off = start
			sv := r.sub(n, "group desc")
			s := &sv
			s.skip(2)
			g := GroupDesc{Type: GroupType(s.u8())}
			s.skip(1)
			g.GroupID = s.u32()
			bl := int(s.u16())
			s.skip(6)
			var err error
			br := s.sub(bl, "buckets")
			if g.Buckets, err = decodeBuckets(&br); err != nil {
				return nil, err
			}
			g.Selection = decodeGroupProps(s)
			if s.err != nil {
				return nil, s.err
			}
			m.Groups = append(m.Groups, g)
		}
		return m, r.err
	case mpGroupStats:
		return decodeGroupStatsReply(r, flags)
	case mpMeterStats:
		m := &MeterStatsReply{Flags: flags}
		for r.left() > 0 {
			start := r.off
			st := MeterStats{MeterID: r.u32()}
			n := int(r.u16())
			if r.err == nil && (n < 40 || n > len(r.b)-start || (n-40)%16 != 0) {
				r.failf(ErrBadLength, "meter stats")
				return nil, r.err
			}
			r.skip(6)
			st.FlowCount = r.u32()
			st.PacketInCount, st.ByteInCount = r.u64(), r.u64()
			st.DurationSec, st.DurationNsec = r.u32(), r.u32()
			for range (n - 40) / 16 {
				st.Bands = append(st.Bands, MeterBandStats{PacketCount: r.u64(), ByteCount: r.u64()})
			}
			if r.err != nil {
				return nil, r.err
			}
			m.Meters = append(m.Meters, st)
		}
		return m, r.err
	}
	return &MultipartUnknown{Reply: true, MPType: typ, Flags: flags, Body: cloneBytes(r.rest())}, nil
}
