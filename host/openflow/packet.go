package openflow

import (
	"bytes"
	"net"
)

// PacketIn is a packet sent to the controller, either as an OpenFlow 1.5
// OFPT_PACKET_IN or, when NX2 is set, as OVS's NXT_PACKET_IN2 (which
// adds Userdata from controller(userdata=...) and pause continuations).
type PacketIn struct {
	NX2      bool
	BufferID uint32
	TotalLen uint32
	Reason   PacketInReason
	Table    uint8
	Cookie   uint64
	// Match holds the packet's metadata fields (in_port, registers, ...).
	Match        Match
	Data         []byte
	Userdata     []byte
	Continuation []byte
}

func (m *PacketIn) msgType() uint8 {
	if m.NX2 {
		return typeExperimenter
	}
	return typePacketIn
}

func (m *PacketIn) appendBody(b []byte) ([]byte, error) {
	if !m.NX2 {
		b = put32(b, m.BufferID)
		b = put16(b, uint16(m.TotalLen))
		b = put8(b, uint8(m.Reason))
		b = put8(b, m.Table)
		b = put64(b, m.Cookie)
		b = appendMatch(b, m.Match)
		b = zeros(b, 2)
		return append(b, m.Data...), nil
	}
	return appendPacketIn2Props(beginNXT(b, nxtPacketIn2), m), nil
}

// appendPacketIn2Props appends the NXT_PACKET_IN2 / NXT_RESUME properties.
func appendPacketIn2Props(b []byte, m *PacketIn) []byte {
	var tmp [8]byte
	b = appendProp(b, 0, m.Data)
	if m.TotalLen != 0 {
		putBE(tmp[:4], uint64(m.TotalLen))
		b = appendProp(b, 1, tmp[:4])
	}
	if m.BufferID != 0xffffffff && m.BufferID != 0 {
		putBE(tmp[:4], uint64(m.BufferID))
		b = appendProp(b, 2, tmp[:4])
	}
	b = appendProp(b, 3, []byte{m.Table})
	// Cookie: a 64-bit property is padded to 8-byte alignment of its value.
	b = put16(b, 4)
	b = put16(b, 16)
	b = zeros(b, 4)
	b = put64(b, m.Cookie)
	b = appendProp(b, 5, []byte{byte(m.Reason)})
	// Metadata: raw OXM fields, no ofp_match header.
	start := len(b)
	b = put16(b, 6)
	b = put16(b, 0)
	mm := m.Match.Normalize()
	for i := range mm {
		b = appendOXM(b, &mm[i])
	}
	setLen16(b, start+2, len(b)-start)
	b = pad8(b, start)
	if len(m.Userdata) > 0 {
		b = appendProp(b, 7, m.Userdata)
	}
	if len(m.Continuation) > 0 {
		b = appendProp(b, 8, m.Continuation)
	}
	return b
}

// Resume continues the pipeline of a packet that a controller(pause)
// action sent to us (NXT_RESUME). Send back the PacketIn as received,
// with Data possibly modified; OVS needs its Continuation and Match.
type Resume struct{ PacketIn }

func (m *Resume) msgType() uint8 { return typeExperimenter }
func (m *Resume) appendBody(b []byte) ([]byte, error) {
	if len(m.Continuation) == 0 {
		return b, encodeError("resume", "packet-in has no continuation: only controller(pause) packet-ins can be resumed")
	}
	return appendPacketIn2Props(beginNXT(b, nxtResume), &m.PacketIn), nil
}

func decodePacketIn(r *reader) (*PacketIn, error) {
	m := &PacketIn{BufferID: r.u32(), TotalLen: uint32(r.u16()), Reason: PacketInReason(r.u8()), Table: r.u8(), Cookie: r.u64()}
	var err error
	if m.Match, err = decodeMatch(r); err != nil {
		return nil, err
	}
	r.skip(2)
	m.Data = cloneBytes(r.rest())
	return m, r.err
}

func decodePacketIn2(r *reader) (*PacketIn, error) {
	m := &PacketIn{NX2: true, BufferID: 0xffffffff}
	for r.left() >= 4 {
		typ := r.u16()
		n := int(r.u16())
		if n < 4 {
			r.failf(ErrBadLength, "packet-in2 property")
			return nil, r.err
		}
		v := r.bytes(n - 4)
		r.skip(min((8-n%8)%8, r.left()))
		if r.err != nil {
			return nil, r.err
		}
		switch typ {
		case 0:
			m.Data = cloneBytes(v)
		case 1:
			m.TotalLen = uint32(beUint(v))
		case 2:
			m.BufferID = uint32(beUint(v))
		case 3:
			if len(v) > 0 {
				m.Table = v[0]
			}
		case 4:
			if len(v) == 12 {
				v = v[4:]
			}
			m.Cookie = beUint(v)
		case 5:
			if len(v) > 0 {
				m.Reason = PacketInReason(v[0])
			}
		case 6:
			s := newReader(v, "packet-in2 metadata")
			for s.left() > 0 {
				var ok bool
				if m.Match, ok = appendDecodedOXM(s, m.Match); !ok {
					return nil, s.err
				}
			}
			m.Match = m.Match.Normalize()
		case 7:
			m.Userdata = cloneBytes(v)
		case 8:
			m.Continuation = cloneBytes(v)
		}
	}
	if m.TotalLen == 0 {
		m.TotalLen = uint32(len(m.Data))
	}
	return m, r.err
}

// PacketOut injects a packet: Actions run on Data as if it arrived on
// InPort (PortController when 0).
type PacketOut struct {
	InPort  uint32
	Actions []Action
	Data    []byte
}

func (m *PacketOut) msgType() uint8 { return typePacketOut }
func (m *PacketOut) appendBody(b []byte) ([]byte, error) {
	b = put32(b, 0xffffffff)
	lenAt := len(b)
	b = put16(b, 0)
	b = zeros(b, 2)
	in := m.InPort
	if in == 0 {
		in = PortController
	}
	b = appendMatch(b, Match{InPort(in)})
	start := len(b)
	b, err := appendActionList(b, m.Actions)
	if err != nil {
		return b, err
	}
	setLen16(b, lenAt, len(b)-start)
	return append(b, m.Data...), nil
}

func decodePacketOut(r *reader) (*PacketOut, error) {
	m := &PacketOut{}
	r.u32()
	al := int(r.u16())
	r.skip(2)
	mt, err := decodeMatch(r)
	if err != nil {
		return nil, err
	}
	if f := mt.find(FieldInPort); f != nil {
		m.InPort = uint32(f.Uint64())
	}
	ar := r.sub(al, "actions")
	if m.Actions, err = decodeActions(&ar); err != nil {
		return nil, err
	}
	m.Data = cloneBytes(r.rest())
	return m, r.err
}

// Port describes a switch port (ofp_port with its Ethernet property).
type Port struct {
	PortNo    uint32
	HWAddr    net.HardwareAddr
	Name      string
	Config    uint32
	State     uint32
	Curr      uint32
	CurrSpeed uint32
	MaxSpeed  uint32
}

func appendPortDesc(b []byte, p *Port) []byte {
	start := len(b)
	b = put32(b, p.PortNo)
	b = put16(b, 0)
	b = zeros(b, 2)
	var hw [6]byte
	copy(hw[:], p.HWAddr)
	b = append(b, hw[:]...)
	b = zeros(b, 2)
	var name [16]byte
	copy(name[:15], p.Name)
	b = append(b, name[:]...)
	b = put32(b, p.Config)
	b = put32(b, p.State)
	b = put16(b, 0) // OFPPDPT_ETHERNET
	b = put16(b, 32)
	b = zeros(b, 4)
	b = put32(b, p.Curr)
	b = put32(b, 0)
	b = put32(b, 0)
	b = put32(b, 0)
	b = put32(b, p.CurrSpeed)
	b = put32(b, p.MaxSpeed)
	setLen16(b, start+4, len(b)-start)
	return b
}

func decodePortDesc(r *reader) (Port, error) {
	start := r.off
	p := Port{PortNo: r.u32()}
	n := int(r.u16())
	if r.err == nil && (n < 40 || n > len(r.b)-start) {
		r.failf(ErrBadLength, "port")
		return p, r.err
	}
	r.skip(2)
	p.HWAddr = net.HardwareAddr(cloneBytes(r.bytes(6)))
	r.skip(2)
	name := r.bytes(16)
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	p.Name = string(name)
	p.Config = r.u32()
	p.State = r.u32()
	props := r.sub(n-40, "port properties")
	for props.left() >= 4 {
		typ := props.u16()
		pl := int(props.u16())
		if pl < 4 {
			props.failf(ErrBadLength, "port property")
			break
		}
		v := props.sub(pl-4, "port property")
		props.skip(min((8-pl%8)%8, props.left()))
		if typ == 0 {
			v.skip(4)
			p.Curr = v.u32()
			v.skip(12)
			p.CurrSpeed = v.u32()
			p.MaxSpeed = v.u32()
		}
	}
	if props.err != nil {
		return p, props.err
	}
	return p, r.err
}

// PortStatus reports a port added (0), deleted (1) or modified (2).
type PortStatus struct {
	Reason uint8
	Port   Port
}

func (m *PortStatus) msgType() uint8 { return typePortStatus }
func (m *PortStatus) appendBody(b []byte) ([]byte, error) {
	b = put8(b, m.Reason)
	b = zeros(b, 7)
	return appendPortDesc(b, &m.Port), nil
}

func decodePortStatus(r *reader) (*PortStatus, error) {
	m := &PortStatus{Reason: r.u8()}
	r.skip(7)
	p, err := decodePortDesc(r)
	m.Port = p
	return m, err
}

// Async config property types (ofp_async_config_prop_type).
const (
	AsyncPacketInSlave    uint16 = 0
	AsyncPacketInMaster   uint16 = 1
	AsyncPortStatusSlave  uint16 = 2
	AsyncPortStatusMaster uint16 = 3
	AsyncFlowRemSlave     uint16 = 4
	AsyncFlowRemMaster    uint16 = 5
)

// AsyncProp enables the reasons in Mask (bit n = reason n) for one
// async message type and role.
type AsyncProp struct {
	Type uint16
	Mask uint32
}

// SetAsync chooses which asynchronous messages the switch sends on this
// connection. OVS service connections (the bridge's .mgmt socket) start
// with packet-ins disabled; enable them here.
type SetAsync struct{ Props []AsyncProp }

func (m *SetAsync) msgType() uint8 { return typeSetAsync }
func (m *SetAsync) appendBody(b []byte) ([]byte, error) {
	for _, p := range m.Props {
		b = put16(b, p.Type)
		b = put16(b, 8)
		b = put32(b, p.Mask)
	}
	return b, nil
}

func decodeSetAsync(r *reader) (*SetAsync, error) {
	m := &SetAsync{}
	for r.left() >= 4 {
		typ := r.u16()
		n := int(r.u16())
		if n < 4 {
			r.failf(ErrBadLength, "async property")
			return nil, r.err
		}
		v := r.bytes(n - 4)
		if r.err != nil {
			return nil, r.err
		}
		if len(v) >= 4 {
			m.Props = append(m.Props, AsyncProp{Type: typ, Mask: uint32(beUint(v[:4]))})
		}
	}
	return m, r.err
}
