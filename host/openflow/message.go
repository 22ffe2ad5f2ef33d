package openflow

import "fmt"

// Message is an OpenFlow message body. The header (version, type,
// length, xid) is added by AppendMessage and stripped by DecodeMessage.
type Message interface {
	msgType() uint8
	appendBody(b []byte) ([]byte, error)
}

// AppendMessage appends the complete wire form of m, with xid, to b. It
// does not allocate when b has room, so a caller encoding many messages
// reuses one buffer.
func AppendMessage(b []byte, xid uint32, m Message) ([]byte, error) {
	start := len(b)
	b = append(b, Version, m.msgType(), 0, 0)
	b = put32(b, xid)
	b, err := m.appendBody(b)
	if err != nil {
		return b[:start], err
	}
	n := len(b) - start
	if n > MaxMessageLen {
		return b[:start], fmt.Errorf("encoding %T: %d bytes: %w", m, n, ErrTooLong)
	}
	setLen16(b, start+2, n)
	return b, nil
}

// Marshal returns the wire form of m in a new slice.
func Marshal(xid uint32, m Message) ([]byte, error) { return AppendMessage(nil, xid, m) }

// ParseHeader decodes the fixed header at the start of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, &DecodeError{What: "header", Err: ErrShortMessage}
	}
	h := Header{Version: b[0], Type: b[1], Length: uint16(b[2])<<8 | uint16(b[3]),
		Xid: uint32(b[4])<<24 | uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7])}
	if h.Length < HeaderLen {
		return h, &DecodeError{What: "header", Offset: 2, Err: ErrBadLength}
	}
	return h, nil
}

// DecodeMessage decodes the first message in b. It returns the header,
// the message, and the number of bytes consumed (the header's length).
// Messages of a known type whose body does not decode return an error
// wrapping ErrShortMessage, ErrBadLength or ErrUnknownType; messages of
// types this package does not model are returned as *Unknown.
func DecodeMessage(b []byte) (Header, Message, int, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, nil, 0, err
	}
	if int(h.Length) > len(b) {
		return h, nil, 0, &DecodeError{What: "message", Offset: len(b), Err: ErrShortMessage}
	}
	n := int(h.Length)
	if h.Version != Version && h.Type != typeHello {
		return h, nil, n, &DecodeError{What: "header", Err: ErrBadVersion}
	}
	r := newReader(b[HeaderLen:n], typeName(h.Type))
	m, err := decodeBody(h, r)
	if err == nil && r.err != nil {
		err = r.err
	}
	if err != nil {
		return h, nil, n, err
	}
	return h, m, n, nil
}

func decodeBody(h Header, r *reader) (Message, error) {
	switch h.Type {
	case typeHello:
		return decodeHello(r)
	case typeError:
		return decodeError(r)
	case typeEchoRequest:
		return &EchoRequest{Data: cloneBytes(r.rest())}, nil
	case typeEchoReply:
		return &EchoReply{Data: cloneBytes(r.rest())}, nil
	case typeFeaturesRequest:
		return &FeaturesRequest{}, nil
	case typeFeaturesReply:
		return decodeFeatures(r)
	case typeGetConfigReq:
		return &GetConfigRequest{}, nil
	case typeGetConfigReply, typeSetConfig:
		c := SwitchConfig{Flags: r.u16(), MissSendLen: r.u16()}
		if h.Type == typeSetConfig {
			return &SetConfig{c}, r.err
		}
		return &GetConfigReply{c}, r.err
	case typeBarrierRequest:
		return &BarrierRequest{}, nil
	case typeBarrierReply:
		return &BarrierReply{}, nil
	case typeFlowMod:
		return decodeFlowMod(r)
	case typeExperimenter:
		return decodeExperimenter(r)
	case typeBundleControl:
		return decodeBundleControl(r)
	case typeBundleAdd:
		return decodeBundleAdd(r)
	case typeMultipartReq:
		return decodeMultipartRequest(r)
	case typeMultipartReply:
		return decodeMultipartReply(r)
	case typeGroupMod:
		return decodeGroupMod(r)
	case typeMeterMod:
		return decodeMeterMod(r)
	case typePacketIn:
		return decodePacketIn(r)
	case typeFlowRemoved:
		return decodeFlowRemoved(r)
	case typePacketOut:
		return decodePacketOut(r)
	case typePortStatus:
		return decodePortStatus(r)
	case typeRoleRequest, typeRoleReply:
		m := &RoleRequest{Role: Role(r.u32()), ShortID: r.u16()}
		r.skip(2)
		m.GenerationID = r.u64()
		if h.Type == typeRoleReply {
			return &RoleReply{*m}, r.err
		}
		return m, r.err
	case typeSetAsync:
		return decodeSetAsync(r)
	}
	return &Unknown{Type: h.Type, Body: cloneBytes(r.rest())}, nil
}

var typeNames = map[uint8]string{
	typeHello: "HELLO", typeError: "ERROR", typeEchoRequest: "ECHO_REQUEST", typeEchoReply: "ECHO_REPLY",
	typeExperimenter: "EXPERIMENTER", typeFeaturesRequest: "FEATURES_REQUEST", typeFeaturesReply: "FEATURES_REPLY",
	typeGetConfigReq: "GET_CONFIG_REQUEST", typeGetConfigReply: "GET_CONFIG_REPLY", typeSetConfig: "SET_CONFIG",
	typePacketIn: "PACKET_IN", typeFlowRemoved: "FLOW_REMOVED", typePortStatus: "PORT_STATUS", typePacketOut: "PACKET_OUT",
	typeFlowMod: "FLOW_MOD", typeGroupMod: "GROUP_MOD", typeMultipartReq: "MULTIPART_REQUEST", typeMultipartReply: "MULTIPART_REPLY",
	typeBarrierRequest: "BARRIER_REQUEST", typeBarrierReply: "BARRIER_REPLY", typeRoleRequest: "ROLE_REQUEST",
	typeRoleReply: "ROLE_REPLY", typeSetAsync: "SET_ASYNC", typeMeterMod: "METER_MOD",
	typeBundleControl: "BUNDLE_CONTROL", typeBundleAdd: "BUNDLE_ADD_MESSAGE",
}

func typeName(t uint8) string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("message type %d", t)
}

// Unknown is a message of a type this package does not model.
type Unknown struct {
	Type uint8
	Body []byte
}

func (m *Unknown) msgType() uint8                      { return m.Type }
func (m *Unknown) appendBody(b []byte) ([]byte, error) { return append(b, m.Body...), nil }

// Hello opens a connection and advertises the versions we speak.
type Hello struct {
	// Versions is the bitmap of supported wire versions (bit n = version n).
	// Zero means "OpenFlow 1.5 only".
	Versions uint32
}

func (m *Hello) msgType() uint8 { return typeHello }
func (m *Hello) appendBody(b []byte) ([]byte, error) {
	v := m.Versions
	if v == 0 {
		v = 1 << Version
	}
	b = put16(b, 1) // OFPHET_VERSIONBITMAP
	b = put16(b, 8)
	b = put32(b, v)
	return b, nil
}

func decodeHello(r *reader) (*Hello, error) {
	m := &Hello{}
	for r.left() >= 4 {
		typ := r.u16()
		n := int(r.u16())
		if n < 4 {
			r.failf(ErrBadLength, "hello element")
			return nil, r.err
		}
		body := r.bytes(n - 4)
		r.skip(min((8-n%8)%8, r.left()))
		if r.err != nil {
			return nil, r.err
		}
		if typ == 1 && len(body) >= 4 {
			m.Versions = uint32(beUint(body[:4]))
		}
	}
	return m, nil
}

// EchoRequest is a keepalive; the peer answers with EchoReply carrying the same Data.
type EchoRequest struct{ Data []byte }

// EchoReply answers EchoRequest.
type EchoReply struct{ Data []byte }

func (m *EchoRequest) msgType() uint8                      { return typeEchoRequest }
func (m *EchoRequest) appendBody(b []byte) ([]byte, error) { return append(b, m.Data...), nil }
func (m *EchoReply) msgType() uint8                        { return typeEchoReply }
func (m *EchoReply) appendBody(b []byte) ([]byte, error)   { return append(b, m.Data...), nil }

// FeaturesRequest asks for the datapath ID and table count.
type FeaturesRequest struct{}

func (m *FeaturesRequest) msgType() uint8                      { return typeFeaturesRequest }
func (m *FeaturesRequest) appendBody(b []byte) ([]byte, error) { return b, nil }

// FeaturesReply describes the switch.
type FeaturesReply struct {
	DatapathID   uint64
	NBuffers     uint32
	NTables      uint8
	AuxiliaryID  uint8
	Capabilities uint32
}

func (m *FeaturesReply) msgType() uint8 { return typeFeaturesReply }
func (m *FeaturesReply) appendBody(b []byte) ([]byte, error) {
	b = put64(b, m.DatapathID)
	b = put32(b, m.NBuffers)
	b = put8(b, m.NTables)
	b = put8(b, m.AuxiliaryID)
	b = zeros(b, 2)
	b = put32(b, m.Capabilities)
	return put32(b, 0), nil
}

func decodeFeatures(r *reader) (*FeaturesReply, error) {
	m := &FeaturesReply{DatapathID: r.u64(), NBuffers: r.u32(), NTables: r.u8(), AuxiliaryID: r.u8()}
	r.skip(2)
	m.Capabilities = r.u32()
	r.skip(4)
	return m, r.err
}

// SwitchConfig is the body of GET_CONFIG_REPLY and SET_CONFIG.
type SwitchConfig struct {
	Flags       uint16 // OFPC_FRAG_*
	MissSendLen uint16
}

// GetConfigRequest asks for the switch configuration.
type GetConfigRequest struct{}

// GetConfigReply carries the switch configuration.
type GetConfigReply struct{ SwitchConfig }

// SetConfig sets the switch configuration.
type SetConfig struct{ SwitchConfig }

func (m *GetConfigRequest) msgType() uint8                      { return typeGetConfigReq }
func (m *GetConfigRequest) appendBody(b []byte) ([]byte, error) { return b, nil }
func (m *GetConfigReply) msgType() uint8                        { return typeGetConfigReply }
func (m *GetConfigReply) appendBody(b []byte) ([]byte, error) {
	return put16(put16(b, m.Flags), m.MissSendLen), nil
}
func (m *SetConfig) msgType() uint8 { return typeSetConfig }
func (m *SetConfig) appendBody(b []byte) ([]byte, error) {
	return put16(put16(b, m.Flags), m.MissSendLen), nil
}

// BarrierRequest asks the switch to finish everything sent before it.
type BarrierRequest struct{}

// BarrierReply says everything before the matching request is done.
type BarrierReply struct{}

func (m *BarrierRequest) msgType() uint8                      { return typeBarrierRequest }
func (m *BarrierRequest) appendBody(b []byte) ([]byte, error) { return b, nil }
func (m *BarrierReply) msgType() uint8                        { return typeBarrierReply }
func (m *BarrierReply) appendBody(b []byte) ([]byte, error)   { return b, nil }

// Role is the controller role.
type Role uint32

const (
	RoleNoChange Role = 0
	RoleEqual    Role = 1
	RoleMaster   Role = 2
	RoleSlave    Role = 3
)

// RoleRequest changes or queries the controller role.
type RoleRequest struct {
	Role         Role
	ShortID      uint16
	GenerationID uint64
}

// RoleReply answers RoleRequest.
type RoleReply struct{ RoleRequest }

func (m *RoleRequest) msgType() uint8 { return typeRoleRequest }
func (m *RoleRequest) appendBody(b []byte) ([]byte, error) {
	b = put32(b, uint32(m.Role))
	b = put16(b, m.ShortID)
	b = zeros(b, 2)
	return put64(b, m.GenerationID), nil
}
func (m *RoleReply) msgType() uint8                      { return typeRoleReply }
func (m *RoleReply) appendBody(b []byte) ([]byte, error) { return m.RoleRequest.appendBody(b) }
