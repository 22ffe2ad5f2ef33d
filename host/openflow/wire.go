package openflow

import (
	"encoding/binary"
)

// Version is the only OpenFlow version this package speaks: OpenFlow 1.5
// (wire version 0x06). OVS bridges must list OpenFlow15 in their protocols.
const Version uint8 = 0x06

// HeaderLen is the size of the fixed OpenFlow header.
const HeaderLen = 8

// MaxMessageLen is the largest message the 16-bit length field can carry.
const MaxMessageLen = 0xffff

// Message type codes of OpenFlow 1.5 (ofp_type).
const (
	typeHello           uint8 = 0
	typeError           uint8 = 1
	typeEchoRequest     uint8 = 2
	typeEchoReply       uint8 = 3
	typeExperimenter    uint8 = 4
	typeFeaturesRequest uint8 = 5
	typeFeaturesReply   uint8 = 6
	typeGetConfigReq    uint8 = 7
	typeGetConfigReply  uint8 = 8
	typeSetConfig       uint8 = 9
	typePacketIn        uint8 = 10
	typeFlowRemoved     uint8 = 11
	typePortStatus      uint8 = 12
	typePacketOut       uint8 = 13
	typeFlowMod         uint8 = 14
	typeGroupMod        uint8 = 15
	typeMultipartReq    uint8 = 18
	typeMultipartReply  uint8 = 19
	typeBarrierRequest  uint8 = 20
	typeBarrierReply    uint8 = 21
	typeRoleRequest     uint8 = 24
	typeRoleReply       uint8 = 25
	typeSetAsync        uint8 = 28
	typeMeterMod        uint8 = 29
	typeBundleControl   uint8 = 33
	typeBundleAdd       uint8 = 34
)

// nxVendor is the Nicira experimenter ID used by every OVS extension.
const nxVendor uint32 = 0x00002320

// Header is the fixed 8-byte header that starts every OpenFlow message.
type Header struct {
	Version uint8
	Type    uint8
	Length  uint16
	Xid     uint32
}

// The helpers below append big-endian integers. They are tiny so the
// compiler inlines them; encoding never allocates unless b must grow.

func put8(b []byte, v uint8) []byte   { return append(b, v) }
func put16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func put32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func put64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// zeros appends n zero bytes.
func zeros(b []byte, n int) []byte {
	for ; n > 0; n-- {
		b = append(b, 0)
	}
	return b
}

// pad8 appends zero bytes until len(b)-start is a multiple of 8.
func pad8(b []byte, start int) []byte {
	return zeros(b, (8-(len(b)-start)%8)%8)
}

// setLen16 writes v at b[off:off+2]. Used to patch length fields once a
// variable-length structure has been appended.
func setLen16(b []byte, off int, v int) { binary.BigEndian.PutUint16(b[off:], uint16(v)) }

// reader decodes big-endian values from a byte slice with a sticky error:
// after the first short read every accessor returns zero and the error is
// kept, so decoders check r.err once per structure instead of per field.
type reader struct {
	b      []byte
	off    int
	err    error
	ctx    string  // what is being decoded, for error messages
	parent *reader // enclosing structure; only read when building an error
}

func newReader(b []byte, ctx string) *reader { return &reader{b: b, ctx: ctx} }

// what names the structure being decoded, outermost first, e.g.
// "FLOW_MOD: instructions: action". It is only built on failure, so
// decoding does not pay for it.
func (r *reader) what() string {
	if r.parent != nil {
		return r.parent.what() + ": " + r.ctx
	}
	return r.ctx
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = &DecodeError{What: r.what(), Offset: r.off, Err: err}
	}
}

func (r *reader) failf(err error, what string) {
	if r.err == nil {
		r.err = &DecodeError{What: r.what() + ": " + what, Offset: r.off, Err: err}
	}
}

func (r *reader) left() int {
	if r.err != nil {
		return 0
	}
	return len(r.b) - r.off
}

func (r *reader) need(n int) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || len(r.b)-r.off < n {
		r.fail(ErrShortMessage)
		return false
	}
	return true
}

func (r *reader) u8() uint8 {
	if !r.need(1) {
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u16() uint16 {
	if !r.need(2) {
		return 0
	}
	v := binary.BigEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) u32() uint32 {
	if !r.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64() uint64 {
	if !r.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *reader) skip(n int) {
	if r.need(n) {
		r.off += n
	}
}

// bytes returns the next n bytes without copying.
func (r *reader) bytes(n int) []byte {
	if !r.need(n) {
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

// sub returns a reader over the next n bytes and advances past them.
// It is a value so nested decoding stays on the stack.
func (r *reader) sub(n int, ctx string) reader {
	b := r.bytes(n)
	return reader{b: b, ctx: ctx, err: r.err, parent: r}
}

// rest returns everything that is left.
func (r *reader) rest() []byte { return r.bytes(r.left()) }

// cloneBytes copies b so decoded values never alias the input buffer.
func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
