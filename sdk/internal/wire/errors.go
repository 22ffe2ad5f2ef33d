package wire

import (
	"context"
	"errors"

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
