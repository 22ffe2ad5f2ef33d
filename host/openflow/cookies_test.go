package openflow

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeFlowCookiesReply(t *testing.T) {
	reply := &FlowStatsReply{Flags: MultipartMore, Flows: []FlowStats{
		{Flow: Flow{Table: 3, Priority: 100, Cookie: 0x1_0002_0000_0005, Match: Match{EthType(0x0800)},
			Instructions: []Instruction{Apply(Output{Port: 2})}}, PacketCount: 9},
		{Flow: Flow{Table: 254, Cookie: 0xdead}},
	}}
	b := mustMarshal(7, reply)
	h, got, err := DecodeFlowCookiesReply(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &FlowCookiesReply{Flags: MultipartMore, Cookies: []FlowCookie{{Table: 3, Cookie: 0x1_0002_0000_0005}, {Table: 254, Cookie: 0xdead}}}
	if diff := cmp.Diff(want, got); diff != "" || h.Xid != 7 {
		t.Errorf("xid %d, reply (-want +got):\n%s", h.Xid, diff)
	}
}

func TestDecodeFlowCookiesReplyRefuses(t *testing.T) {
	flowStats := mustMarshal(1, &FlowStatsReply{Flows: []FlowStats{{Flow: Flow{Table: 1, Cookie: 2}}}})
	badLen := append([]byte(nil), flowStats...)
	badLen[HeaderLen+8+1] = 200 // the flow's length runs past the message
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"not a multipart reply", mustMarshal(1, &EchoRequest{}), ErrUnknownType},
		{"another multipart reply", mustMarshal(1, &PortDescReply{}), ErrUnknownType},
		{"flow length past the end", badLen, ErrBadLength},
		{"truncated", flowStats[:len(flowStats)-4], ErrShortMessage},
	} {
		if _, _, err := DecodeFlowCookiesReply(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
	}
}

// FuzzDecodeFlowCookiesReply: arbitrary bytes never panic, failures are
// typed, and what decodes agrees with the full decoder's cookies.
func FuzzDecodeFlowCookiesReply(f *testing.F) {
	fuzzBodies(f, func(m Message) bool { _, ok := m.(*FlowStatsReply); return ok })
	f.Fuzz(func(t *testing.T, body []byte) {
		b := fuzzBody(typeMultipartReply, body)
		_, got, err := DecodeFlowCookiesReply(b)
		if err != nil {
			if !isTypedError(err) {
				t.Fatalf("error %v is not a typed error", err)
			}
			return
		}
		if _, m, _, err := DecodeMessage(b); err == nil {
			full := m.(*FlowStatsReply)
			if len(full.Flows) != len(got.Cookies) {
				t.Fatalf("full decoder saw %d flows, cookie decoder %d", len(full.Flows), len(got.Cookies))
			}
			for i, fs := range full.Flows {
				if (FlowCookie{fs.Flow.Table, fs.Flow.Cookie}) != got.Cookies[i] {
					t.Fatalf("flow %d: full decoder %d/%#x, cookie decoder %+v", i, fs.Flow.Table, fs.Flow.Cookie, got.Cookies[i])
				}
			}
		}
	})
}
