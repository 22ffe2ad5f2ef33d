package openflow

// Nicira experimenter message subtypes.
const (
	nxtSetPacketInFormat uint32 = 16
	nxtSetControllerID   uint32 = 20
	nxtResume            uint32 = 28
	nxtPacketIn2         uint32 = 30
)

// Experimenter is an experimenter message this package does not model.
type Experimenter struct {
	Experimenter uint32
	ExpType      uint32
	Data         []byte
}

func (m *Experimenter) msgType() uint8 { return typeExperimenter }
func (m *Experimenter) appendBody(b []byte) ([]byte, error) {
	b = put32(b, m.Experimenter)
	b = put32(b, m.ExpType)
	return append(b, m.Data...), nil
}

func beginNXT(b []byte, sub uint32) []byte { return put32(put32(b, nxVendor), sub) }

// SetControllerID sets this connection's controller ID
// (NXT_SET_CONTROLLER_ID); controller(id=N) actions target it.
type SetControllerID struct{ ID uint16 }

func (m *SetControllerID) msgType() uint8 { return typeExperimenter }
func (m *SetControllerID) appendBody(b []byte) ([]byte, error) {
	b = beginNXT(b, nxtSetControllerID)
	b = zeros(b, 6)
	return put16(b, m.ID), nil
}

// PacketInFormat values for SetPacketInFormat.
const (
	PacketInStandard uint32 = 0
	PacketInNX2      uint32 = 2
)

// SetPacketInFormat selects how the switch sends packet-ins
// (NXT_SET_PACKET_IN_FORMAT). NX2 (NXT_PACKET_IN2) carries userdata and
// continuations.
type SetPacketInFormat struct{ Format uint32 }

func (m *SetPacketInFormat) msgType() uint8 { return typeExperimenter }
func (m *SetPacketInFormat) appendBody(b []byte) ([]byte, error) {
	return put32(beginNXT(b, nxtSetPacketInFormat), m.Format), nil
}

func decodeExperimenter(r *reader) (Message, error) {
	exp := r.u32()
	sub := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	if exp == nxVendor {
		switch sub {
		case nxtSetControllerID:
			r.skip(6)
			return &SetControllerID{ID: r.u16()}, r.err
		case nxtSetPacketInFormat:
			return &SetPacketInFormat{Format: r.u32()}, r.err
		case nxtPacketIn2:
			return decodePacketIn2(r)
		case nxtCTFlush:
			return decodeCTFlush(r)
		case nxtResume:
			pi, err := decodePacketIn2(r)
			if err != nil {
				return nil, err
			}
			return &Resume{*pi}, nil
		}
	}
	return &Experimenter{Experimenter: exp, ExpType: sub, Data: cloneBytes(r.rest())}, nil
}
