package openflow

import (
	"errors"
	"fmt"
)

// Sentinel errors. Decoders wrap them in *DecodeError, so callers use
// errors.Is(err, openflow.ErrShortMessage) and still get a message that
// says which structure and offset was bad.
var (
	// ErrShortMessage: the bytes end before the structure they describe.
	ErrShortMessage = errors.New("openflow: message truncated")
	// ErrBadLength: a length field is smaller than its fixed part, not a
	// multiple of its alignment, or points past the enclosing structure.
	ErrBadLength = errors.New("openflow: bad length field")
	// ErrBadVersion: the header carries a version other than OpenFlow 1.5.
	ErrBadVersion = errors.New("openflow: unsupported OpenFlow version (want 1.5)")
	// ErrUnknownType: a message, action, instruction or field code this
	// package does not know. The value is kept where possible (Unknown*).
	ErrUnknownType = errors.New("openflow: unknown type")
	// ErrBadValue: an encoder was handed a value it cannot put on the wire
	// (for example a mask on a field OVS does not allow masked).
	ErrBadValue = errors.New("openflow: invalid value")
	// ErrTooLong: the encoded message would exceed 65535 bytes.
	ErrTooLong = errors.New("openflow: message longer than 65535 bytes")
	// ErrClosed: the connection was closed by Close.
	ErrClosed = errors.New("openflow: connection closed")
	// ErrDisconnected: the switch connection dropped while a request was
	// outstanding; the request may or may not have been applied.
	ErrDisconnected = errors.New("openflow: switch disconnected")
)

// DecodeError says what was being decoded, where, and why it failed.
type DecodeError struct {
	What   string // e.g. "FLOW_MOD: match"
	Offset int    // byte offset within What's enclosing buffer
	Err    error  // one of the sentinel errors
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("decoding %s at offset %d: %v", e.What, e.Offset, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// encodeError builds the error an encoder returns for bad input.
func encodeError(what string, format string, args ...any) error {
	return fmt.Errorf("encoding %s: %s: %w", what, fmt.Sprintf(format, args...), ErrBadValue)
}
