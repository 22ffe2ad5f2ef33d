package openflow

import (
	"fmt"
	"strings"
)

// ErrorCode identifies an OpenFlow error by (type, code), e.g. type 2
// OFPET_BAD_ACTION code 4 OFPBAC_BAD_OUT_PORT. It implements error so it
// can be the target of errors.Is:
//
//	if errors.Is(err, openflow.ErrCodeBadOutPort) { ... }
type ErrorCode struct {
	Type uint16
	Code uint16
}

// Frequently checked error codes. Any other code is reachable through
// ErrorCode{Type: t, Code: c}.
var (
	ErrCodeBadOutPort        = ErrorCode{2, 4}
	ErrCodeBadArgument       = ErrorCode{2, 5}
	ErrCodeMatchInconsistent = ErrorCode{2, 10}
	ErrCodeBadPrereq         = ErrorCode{4, 9}
	ErrCodeBadField          = ErrorCode{4, 6}
	ErrCodeTableFull         = ErrorCode{5, 1}
	ErrCodeBadTableID        = ErrorCode{5, 2}
	ErrCodeOverlap           = ErrorCode{5, 3}
	ErrCodeGroupExists       = ErrorCode{6, 0}
	ErrCodeUnknownGroup      = ErrorCode{6, 8}
	ErrCodeMeterExists       = ErrorCode{12, 1}
	ErrCodeUnknownMeter      = ErrorCode{12, 3}
	ErrCodeBundleMsgFailed   = ErrorCode{17, 13}
)

func (c ErrorCode) Error() string { return c.String() }

// String returns the name OVS prints for the code, e.g.
// "OFPBAC_BAD_OUT_PORT", or "OFPET_x code y" for codes without a name.
func (c ErrorCode) String() string {
	if int(c.Type) < len(errorTypes) {
		t := errorTypes[c.Type]
		if int(c.Code) < len(t.codes) && t.codes[c.Code] != "" {
			return t.prefix + t.codes[c.Code]
		}
		return fmt.Sprintf("%s code %d", t.name, c.Code)
	}
	if c.Type == 0xffff {
		return fmt.Sprintf("OFPET_EXPERIMENTER code %d", c.Code)
	}
	return fmt.Sprintf("error type %d code %d", c.Type, c.Code)
}

// Nicira extension errors in OpenFlow 1.2 and later are experimenter
// errors: type OFPET_EXPERIMENTER, experimenter NX_VENDOR_ID, and the NX
// error number in the code field. These are the ones OVS can send in
// OpenFlow 1.5, named as OVS names them (lib/ofp-errors).
var nxErrorNames = map[uint16]string{
	2:  "NXBRC_NXM_INVALID",
	3:  "NXBRC_NXM_BAD_TYPE",
	4:  "NXBRC_MUST_BE_ZERO",
	5:  "NXBRC_BAD_REASON",
	9:  "NXBRC_FM_BAD_EVENT",
	10: "NXBRC_UNENCODABLE_ERROR",
	11: "NXBAC_MUST_BE_ZERO",
	12: "NXFMFC_HARDWARE",
	13: "NXFMFC_BAD_TABLE_ID",
	15: "NXBAC_BAD_CONJUNCTION",
	16: "NXTTMFC_BAD_COMMAND",
	17: "NXTTMFC_BAD_OPT_LEN",
	18: "NXTTMFC_BAD_FIELD_IDX",
	19: "NXTTMFC_TABLE_FULL",
	20: "NXTTMFC_ALREADY_MAPPED",
	21: "NXTTMFC_DUP_ENTRY",
	22: "OFPBFC_BAD_VERSION",
	23: "NXQOFC_QUEUE_ERROR",
	34: "NXR_NOT_SUPPORTED",
	35: "NXR_STALE",
	36: "NXST_NOT_CONFIGURED",
}

// Nicira error codes worth testing with errors.Is (the experimenter is
// not compared: OVS sends no other vendor's errors).
var (
	ErrCodeNXMustBeZero     = ErrorCode{0xffff, 11}
	ErrCodeNXBadConjunction = ErrorCode{0xffff, 15}
)

// ErrorName names an error as OVS prints it, Nicira extension errors
// included (experimenter is the experimenter ID of an OFPET_EXPERIMENTER
// error; 0 otherwise).
func ErrorName(c ErrorCode, experimenter uint32) string {
	if c.Type == 0xffff && experimenter == nxVendor {
		if n, ok := nxErrorNames[c.Code]; ok {
			return n
		}
		return fmt.Sprintf("NXET code %d", c.Code)
	}
	return c.String()
}

// TypeName returns the OFPET_* name of the error type.
func (c ErrorCode) TypeName() string {
	if int(c.Type) < len(errorTypes) {
		return errorTypes[c.Type].name
	}
	if c.Type == 0xffff {
		return "OFPET_EXPERIMENTER"
	}
	return fmt.Sprintf("OFPET_%d", c.Type)
}

// SwitchError is an OFPT_ERROR message: the switch's rejection of the
// request whose xid it carries. Conn returns it to the caller of exactly
// that request; inside a bundle, Index says which message failed.
type SwitchError struct {
	Code         ErrorCode
	Experimenter uint32 // for Type 0xffff
	Xid          uint32 // xid of the failing request
	Data         []byte // leading bytes of the failing request, as sent back
	// Index is the position of the failing message within a batch passed
	// to Conn.Bundle, or -1 when not applicable.
	Index int
	// Request is the canonical text of the failing request when Conn knows
	// it (for flow mods: the flow in ovs-ofctl syntax).
	Request string
}

func (e *SwitchError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "switch rejected request (xid=%#x): %s", e.Xid, ErrorName(e.Code, e.Experimenter))
	if e.Index >= 0 {
		fmt.Fprintf(&sb, " at batch index %d", e.Index)
	}
	if e.Request != "" {
		sb.WriteString(": ")
		sb.WriteString(e.Request)
	}
	return sb.String()
}

// Is makes errors.Is(err, ErrCodeX) work.
func (e *SwitchError) Is(target error) bool {
	c, ok := target.(ErrorCode)
	return ok && c == e.Code
}

// ErrorMsg is the OFPT_ERROR message itself.
type ErrorMsg struct {
	Code         ErrorCode
	Experimenter uint32
	Data         []byte
}

func (m *ErrorMsg) msgType() uint8 { return typeError }

func (m *ErrorMsg) appendBody(b []byte) ([]byte, error) {
	if m.Code.Type == 0xffff {
		b = put16(b, 0xffff)
		b = put16(b, m.Code.Code)
		b = put32(b, m.Experimenter)
	} else {
		b = put16(b, m.Code.Type)
		b = put16(b, m.Code.Code)
	}
	return append(b, m.Data...), nil
}

func decodeError(r *reader) (*ErrorMsg, error) {
	m := &ErrorMsg{}
	m.Code.Type = r.u16()
	m.Code.Code = r.u16()
	if m.Code.Type == 0xffff {
		m.Experimenter = r.u32()
	}
	m.Data = cloneBytes(r.rest())
	return m, r.err
}

type errorType struct {
	name, prefix string
	codes        []string
}

// errorTypes holds the OpenFlow 1.5 error names, indexed by type then code,
// as OVS prints them.
var errorTypes = []errorType{
	{"OFPET_HELLO_FAILED", "OFPHFC_", []string{"INCOMPATIBLE", "EPERM"}},
	{"OFPET_BAD_REQUEST", "OFPBRC_", []string{"BAD_VERSION", "BAD_TYPE", "BAD_MULTIPART", "BAD_EXPERIMENTER", "BAD_EXP_TYPE", "EPERM", "BAD_LEN", "BUFFER_EMPTY", "BUFFER_UNKNOWN", "BAD_TABLE_ID", "IS_SLAVE", "BAD_PORT", "BAD_PACKET", "MULTIPART_BUFFER_OVERFLOW", "MULTIPART_REQUEST_TIMEOUT", "MULTIPART_REPLY_TIMEOUT", "MULTIPART_BAD_SCHED", "PIPELINE_FIELDS_ONLY", "UNKNOWN"}},
	{"OFPET_BAD_ACTION", "OFPBAC_", []string{"BAD_TYPE", "BAD_LEN", "BAD_EXPERIMENTER", "BAD_EXP_TYPE", "BAD_OUT_PORT", "BAD_ARGUMENT", "EPERM", "TOO_MANY", "BAD_QUEUE", "BAD_OUT_GROUP", "MATCH_INCONSISTENT", "UNSUPPORTED_ORDER", "BAD_TAG", "BAD_SET_TYPE", "BAD_SET_LEN", "BAD_SET_ARGUMENT", "BAD_SET_MASK", "BAD_METER"}},
	{"OFPET_BAD_INSTRUCTION", "OFPBIC_", []string{"UNKNOWN_INST", "UNSUP_INST", "BAD_TABLE_ID", "UNSUP_METADATA", "UNSUP_METADATA_MASK", "BAD_EXPERIMENTER", "BAD_EXP_TYPE", "BAD_LEN", "EPERM", "DUP_INST"}},
	{"OFPET_BAD_MATCH", "OFPBMC_", []string{"BAD_TYPE", "BAD_LEN", "BAD_TAG", "BAD_DL_ADDR_MASK", "BAD_NW_ADDR_MASK", "BAD_WILDCARDS", "BAD_FIELD", "BAD_VALUE", "BAD_MASK", "BAD_PREREQ", "DUP_FIELD", "EPERM"}},
	{"OFPET_FLOW_MOD_FAILED", "OFPFMFC_", []string{"UNKNOWN", "TABLE_FULL", "BAD_TABLE_ID", "OVERLAP", "EPERM", "BAD_TIMEOUT", "BAD_COMMAND", "BAD_FLAGS", "CANT_SYNC", "BAD_PRIORITY", "IS_SYNC"}},
	{"OFPET_GROUP_MOD_FAILED", "OFPGMFC_", []string{"GROUP_EXISTS", "INVALID_GROUP", "WEIGHT_UNSUPPORTED", "OUT_OF_GROUPS", "OUT_OF_BUCKETS", "CHAINING_UNSUPPORTED", "WATCH_UNSUPPORTED", "LOOP", "UNKNOWN_GROUP", "CHAINED_GROUP", "BAD_TYPE", "BAD_COMMAND", "BAD_BUCKET", "BAD_WATCH", "EPERM", "UNKNOWN_BUCKET", "BUCKET_EXISTS"}},
	{"OFPET_PORT_MOD_FAILED", "OFPPMFC_", []string{"BAD_PORT", "BAD_HW_ADDR", "BAD_CONFIG", "BAD_ADVERTISE", "EPERM"}},
	{"OFPET_TABLE_MOD_FAILED", "OFPTMFC_", []string{"BAD_TABLE", "BAD_CONFIG", "EPERM"}},
	{"OFPET_QUEUE_OP_FAILED", "OFPQOFC_", []string{"BAD_PORT", "BAD_QUEUE", "EPERM"}},
	{"OFPET_SWITCH_CONFIG_FAILED", "OFPSCFC_", []string{"BAD_FLAGS", "BAD_LEN", "EPERM"}},
	{"OFPET_ROLE_REQUEST_FAILED", "OFPRRFC_", []string{"STALE", "UNSUP", "BAD_ROLE", "ID_UNSUP", "ID_IN_USE"}},
	{"OFPET_METER_MOD_FAILED", "OFPMMFC_", []string{"UNKNOWN", "METER_EXISTS", "INVALID_METER", "UNKNOWN_METER", "BAD_COMMAND", "BAD_FLAGS", "BAD_RATE", "BAD_BURST", "BAD_BAND", "BAD_BAND_VALUE", "OUT_OF_METERS", "OUT_OF_BANDS"}},
	{"OFPET_TABLE_FEATURES_FAILED", "OFPTFFC_", []string{"BAD_TABLE", "BAD_METADATA", "BAD_TYPE", "BAD_LEN", "BAD_ARGUMENT", "EPERM"}},
	{"OFPET_BAD_PROPERTY", "OFPBPC_", []string{"BAD_TYPE", "BAD_LEN", "BAD_VALUE", "TOO_MANY", "DUP_TYPE", "BAD_EXPERIMENTER", "BAD_EXP_TYPE", "BAD_EXP_VALUE", "EPERM"}},
	{"OFPET_ASYNC_CONFIG_FAILED", "OFPACFC_", []string{"INVALID", "UNSUPPORTED", "EPERM"}},
	{"OFPET_FLOW_MONITOR_FAILED", "OFPMOFC_", []string{"UNKNOWN", "SUBSCRIBER_LIMIT", "EPERM", "BAD_TYPE", "BAD_FLAGS", "BAD_ID", "BAD_COMMAND", "BAD_OUT", "BAD_TABLE_ID"}},
	{"OFPET_BUNDLE_FAILED", "OFPBFC_", []string{"UNKNOWN", "EPERM", "BAD_ID", "BUNDLE_EXIST", "BUNDLE_CLOSED", "OUT_OF_BUNDLES", "BAD_TYPE", "BAD_FLAGS", "MSG_BAD_LEN", "MSG_BAD_XID", "MSG_UNSUP", "MSG_CONFLICT", "MSG_TOO_MANY", "MSG_FAILED", "TIMEOUT", "BUNDLE_IN_PROGRESS"}},
}
