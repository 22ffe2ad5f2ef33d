package openflow

import (
	"context"
	"fmt"
)

// FlowCookiesRequest is a flow stats request (OFPMP_FLOW_DESC) whose
// answer Conn decodes only as far as each flow's table and cookie. Work
// that needs nothing else of a whole-switch dump (the agent's foreign
// sweep) then costs a few bytes per flow instead of a decoded match and
// instruction list: at 100,000 flows that is about 1 MiB of heap instead of
// about 100 MiB of garbage.
type FlowCookiesRequest struct{ FlowStatsRequest }

func (m *FlowCookiesRequest) msgType() uint8 { return typeMultipartReq }
func (m *FlowCookiesRequest) appendBody(b []byte) ([]byte, error) {
	return m.FlowStatsRequest.appendBody(b)
}

// FlowCookie is a flow's table and cookie.
type FlowCookie struct {
	Table  uint8
	Cookie uint64
}

// FlowCookiesReply is one part of the answer to FlowCookiesRequest.
type FlowCookiesReply struct {
	Flags   uint16
	Cookies []FlowCookie
}

func (m *FlowCookiesReply) msgType() uint8 { return typeMultipartReply }
func (m *FlowCookiesReply) appendBody(b []byte) ([]byte, error) {
	return b, fmt.Errorf("flow cookies reply: a decode-only view of a flow stats reply, not encodable")
}

// DecodeFlowCookiesReply decodes a whole OpenFlow message holding a flow
// stats reply into its flows' tables and cookies. Each flow's length is
// checked against the message, as DecodeMessage would, but its match,
// stats and instructions are skipped.
func DecodeFlowCookiesReply(b []byte) (Header, *FlowCookiesReply, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, nil, err
	}
	if int(h.Length) > len(b) {
		return h, nil, &DecodeError{What: "message", Offset: len(b), Err: ErrShortMessage}
	}
	if h.Version != Version {
		return h, nil, &DecodeError{What: "header", Err: ErrBadVersion}
	}
	if h.Type != typeMultipartReply {
		return h, nil, &DecodeError{What: "flow cookies reply: message type " + typeName(h.Type), Err: ErrUnknownType}
	}
	r := newReader(b[HeaderLen:h.Length], "flow cookies reply")
	typ := r.u16()
	m := &FlowCookiesReply{Flags: r.u16()}
	r.skip(4)
	if r.err == nil && typ != mpFlowDesc {
		r.failf(ErrUnknownType, fmt.Sprintf("multipart type %d is not a flow stats reply", typ))
	}
	for r.err == nil && r.left() > 0 {
		start := r.off
		n := int(r.u16())
		if r.err == nil && (n < 24 || n > len(r.b)-start) {
			r.failf(ErrBadLength, "flow desc")
			break
		}
		r.skip(2)
		c := FlowCookie{Table: r.u8()}
		r.skip(1 + 2*5) // pad, priority, idle and hard timeouts, flags, importance
		c.Cookie = r.u64()
		r.off = start + n
		m.Cookies = append(m.Cookies, c)
	}
	if r.err != nil {
		return h, nil, r.err
	}
	return h, m, nil
}

// DumpCookies returns the table and cookie of every flow req selects, in
// the order the switch reports them.
func (c *Conn) DumpCookies(ctx context.Context, req FlowStatsRequest) ([]FlowCookie, error) {
	return collect(ctx, c, &FlowCookiesRequest{req}, "flow cookies", func(r *FlowCookiesReply) []FlowCookie { return r.Cookies })
}
