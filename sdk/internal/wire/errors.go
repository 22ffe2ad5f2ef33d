package wire

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorDomain tags Switchyard error reasons in gRPC status details.
const ErrorDomain = "switchyard.dev"

// ToStatus turns err into a gRPC status error that carries the reason of
// the first sentinel err wraps, so the other side can restore errors.Is.
func ToStatus(err error, sentinels map[string]error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !hasSentinel(err, sentinels) {
		return err
	}
	code := codes.Unknown
	if errors.Is(err, context.Canceled) {
		code = codes.Canceled
	} else if errors.Is(err, context.DeadlineExceeded) {
		code = codes.DeadlineExceeded
	}
	for reason, s := range sentinels {
		if errors.Is(err, s) {
			st := status.New(codes.FailedPrecondition, err.Error())
			if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}); derr == nil {
				return d.Err()
			}
			return st.Err()
		}
	}
	return status.Error(code, err.Error())
}

func hasSentinel(err error, sentinels map[string]error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// remoteError is an error that came over the wire: its text is the remote
// message, and it unwraps to the sentinel the remote side named.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// FromStatus restores an error sent with ToStatus.
func FromStatus(err error, sentinels map[string]error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			if s, ok := sentinels[info.GetReason()]; ok {
				return &remoteError{msg: st.Message(), sentinel: s}
			}
		}
	}
	switch st.Code() {
	case codes.Canceled:
		return &remoteError{msg: st.Message(), sentinel: context.Canceled}
	case codes.DeadlineExceeded:
		return &remoteError{msg: st.Message(), sentinel: context.DeadlineExceeded}
	}
	return &remoteError{msg: st.Message()}
}

// cniReason is the ErrorInfo reason of a structured CNI error; its
// metadata holds code, msg and details.
const cniReason = "CNI_ERROR"

// CNIStatus is the status for a CNI error result: text is the full error
// text (for logs), the fields go in an ErrorInfo detail.
func CNIStatus(text string, code uint, msg, details string) error {
	st := status.New(codes.FailedPrecondition, text)
	d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: cniReason, Domain: ErrorDomain,
		Metadata: map[string]string{"code": strconv.FormatUint(uint64(code), 10), "msg": msg, "details": details}})
	if err != nil {
		return st.Err()
	}
	return d.Err()
}

// CNIFromStatus finds a CNI error result in a status error.
func CNIFromStatus(err error) (code uint, msg, details string, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus {
		return 0, "", "", false
	}
	for _, d := range st.Details() {
		if info, is := d.(*errdetails.ErrorInfo); is && info.GetDomain() == ErrorDomain && info.GetReason() == cniReason {
			m := info.GetMetadata()
			c, perr := strconv.ParseUint(m["code"], 10, 32)
			if perr != nil {
				return 0, "", "", false
			}
			return uint(c), m["msg"], m["details"], true
		}
	}
	return 0, "", "", false
}
