package sdkhost

import (
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/internal/fastwire"
)

// AppendFlow appends f's wire form to b: a few dozen bytes for a typical
// flow, against several hundred for the decoded value. The host keeps the
// flows it installed in this form and decodes one only when it needs it
// again (replay, re-layout, introspection).
func AppendFlow(b []byte, f *flow.Flow) []byte { return fastwire.AppendFlow(b, f) }

// DecodeFlow is the inverse of AppendFlow.
func DecodeFlow(b []byte) (*flow.Flow, error) { return fastwire.DecodeFlow(b) }

// FlowEncoder encodes many flows as AppendFlow does, reusing its scratch
// space. Not safe for concurrent use.
type FlowEncoder = fastwire.FlowEncoder
