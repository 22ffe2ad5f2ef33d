package openflow

// Bundle control types.
const (
	BundleOpenRequest    uint16 = 0
	BundleOpenReply      uint16 = 1
	BundleCloseRequest   uint16 = 2
	BundleCloseReply     uint16 = 3
	BundleCommitRequest  uint16 = 4
	BundleCommitReply    uint16 = 5
	BundleDiscardRequest uint16 = 6
	BundleDiscardReply   uint16 = 7
)

// Bundle flags.
const (
	BundleAtomic  uint16 = 1
	BundleOrdered uint16 = 2
)

// BundleControl opens, closes, commits or discards a bundle.
type BundleControl struct {
	ID    uint32
	Type  uint16
	Flags uint16
}

func (m *BundleControl) msgType() uint8 { return typeBundleControl }
func (m *BundleControl) appendBody(b []byte) ([]byte, error) {
	b = put32(b, m.ID)
	b = put16(b, m.Type)
	return put16(b, m.Flags), nil
}

func decodeBundleControl(r *reader) (*BundleControl, error) {
	return &BundleControl{ID: r.u32(), Type: r.u16(), Flags: r.u16()}, r.err
}

// BundleAdd adds Message (sent with xid Xid) to bundle ID.
type BundleAdd struct {
	ID      uint32
	Flags   uint16
	Xid     uint32
	Message Message
}

func (m *BundleAdd) msgType() uint8 { return typeBundleAdd }
func (m *BundleAdd) appendBody(b []byte) ([]byte, error) {
	b = put32(b, m.ID)
	b = zeros(b, 2)
	b = put16(b, m.Flags)
	start := len(b)
	b, err := AppendMessage(b, m.Xid, m.Message)
	if err != nil {
		return b, err
	}
	return pad8(b, start), nil
}

func decodeBundleAdd(r *reader) (*BundleAdd, error) {
	m := &BundleAdd{ID: r.u32()}
	r.skip(2)
	m.Flags = r.u16()
	if r.err != nil {
		return nil, r.err
	}
	h, inner, _, err := DecodeMessage(r.rest())
	if err != nil {
		return nil, err
	}
	m.Xid, m.Message = h.Xid, inner
	return m, nil
}
