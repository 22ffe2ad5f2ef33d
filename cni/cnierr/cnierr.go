package cnierr

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// Codes in the range the spec leaves to plugins (100+). They are stable so
// operators can alert on them.
const (
	// IPAMExhausted: the node's pod CIDR has no free address.
	IPAMExhausted uint = 101
	// Interface: creating or configuring the pod interface failed.
	Interface uint = 102
	// AlreadyAttached: ADD for a container/ifname that is attached already.
	AlreadyAttached uint = 103
	// CheckFailed: CHECK found the attachment incomplete.
	CheckFailed uint = 104
	// Switch: the OVS port or flows could not be programmed.
	Switch uint = 105
)

// Error is a CNI error with a code, a one-line message and what to do.
type Error struct {
	Code    uint
	Msg     string
	Details string
}

// New returns an *Error.
func New(code uint, msg, details string) *Error {
	return &Error{Code: code, Msg: msg, Details: details}
}

// Newf returns an *Error with a formatted message and no details.
func Newf(code uint, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Error renders the marker From looks for: "[cni:101] msg | details".
func (e *Error) Error() string {
	s := "[cni:" + strconv.FormatUint(uint64(e.Code), 10) + "] " + e.Msg
	if e.Details != "" {
		s += " | " + e.Details
	}
	return s
}

// marker finds the code an Error left in a flattened message.
var marker = regexp.MustCompile(`\[cni:(\d{1,4})\] `)

// From recovers the CNI error in err: the *Error itself if it is still in
// the chain, else one parsed back from its text. Text around the marker is
// kept, so context added by wrapping ("podnet: add pod x: ...") survives in
// the message. ok is false when err carries no code.
func From(err error) (e *Error, ok bool) {
	if err == nil {
		return nil, false
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce, true
	}
	var te *types.Error
	if errors.As(err, &te) {
		return &Error{Code: te.Code, Msg: te.Msg, Details: te.Details}, true
	}
	s := err.Error()
	loc := marker.FindStringSubmatchIndex(s)
	if loc == nil {
		return nil, false
	}
	code, _ := strconv.ParseUint(s[loc[2]:loc[3]], 10, 32)
	msg := s[:loc[0]] + s[loc[1]:]
	var details string
	if i := strings.LastIndex(msg, " | "); i >= 0 {
		msg, details = msg[:i], msg[i+3:]
	}
	return &Error{Code: uint(code), Msg: strings.TrimSpace(msg), Details: details}, true
}
