package openflow

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzSeeds are the encoded golden messages: a corpus that reaches every
// decoder. The committed corpus under testdata/fuzz adds truncated and
// corrupted variants found while fuzzing.
func fuzzSeeds(f *testing.F) {
	for _, tc := range goldenMessages {
		f.Add(mustMarshal(1, tc.msg))
	}
	for _, tc := range goldenFlows {
		f.Add(mustMarshal(2, &FlowMod{Flow: tc.flow}))
	}
	for _, tc := range goldenActions {
		f.Add(mustMarshal(3, &FlowMod{Flow: Flow{Match: tc.match, Instructions: tc.ins}}))
	}
}

func isTypedError(err error) bool {
	for _, s := range []error{ErrShortMessage, ErrBadLength, ErrBadVersion, ErrUnknownType, ErrBadValue, ErrTooLong} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// FuzzDecode: arbitrary bytes never panic, and every failure is one of
// the package's typed errors.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, m, n, err := DecodeMessage(b)
		if err != nil {
			if !isTypedError(err) {
				t.Fatalf("DecodeMessage error %v is not a typed error", err)
			}
			return
		}
		if n > len(b) || n < HeaderLen {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		// Whatever decodes must render without panicking.
		if fm, ok := m.(*FlowMod); ok {
			_ = fm.Flow.String()
		}
	})
}

// FuzzRoundTrip: a message that decodes re-encodes to bytes that decode
// to the same message again, and that second encoding is stable.
func FuzzRoundTrip(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, m, _, err := DecodeMessage(b)
		if err != nil {
			return
		}
		b1, err := Marshal(h.Xid, m)
		if err != nil {
			// Decoding accepts some values the encoder refuses (for example a
			// masked field OVS cannot mask); that is a typed refusal.
			if !isTypedError(err) {
				t.Fatalf("re-encoding %T: untyped error %v", m, err)
			}
			return
		}
		_, m2, _, err := DecodeMessage(b1)
		if err != nil {
			t.Fatalf("re-encoded %T does not decode: %v\n%x", m, err, b1)
		}
		b2, err := Marshal(h.Xid, m2)
		if err != nil {
			t.Fatalf("second encode of %T: %v", m2, err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("encoding of %T not stable:\n%x\n%x", m, b1, b2)
		}
		if fm, ok := m.(*FlowMod); ok {
			if s1, s2 := fm.Flow.String(), m2.(*FlowMod).Flow.String(); s1 != s2 {
				t.Fatalf("text differs after round trip:\n%s\n%s", s1, s2)
			}
		}
	})
}

// fuzzBody wraps fuzzed bytes in a header of message type typ, so the
// fuzzer spends its time inside one decoder's body.
func fuzzBody(typ uint8, body []byte) []byte {
	if len(body) > MaxMessageLen-HeaderLen {
		body = body[:MaxMessageLen-HeaderLen]
	}
	n := HeaderLen + len(body)
	return append([]byte{Version, typ, byte(n >> 8), byte(n), 0, 0, 0, 1}, body...)
}

// fuzzBodies seeds a body fuzzer with the golden messages of one type.
func fuzzBodies(f *testing.F, keep func(Message) bool) {
	for _, tc := range goldenMessages {
		if keep(tc.msg) {
			f.Add(mustMarshal(1, tc.msg)[HeaderLen:])
		}
	}
}

// fuzzOneDecoder: never a panic, only typed errors, and whatever decodes
// re-encodes to bytes that decode to the same encoding again.
func fuzzOneDecoder(t *testing.T, b []byte) {
	_, m, _, err := DecodeMessage(b)
	if err != nil {
		if !isTypedError(err) {
			t.Fatalf("untyped error %v", err)
		}
		return
	}
	b1, err := Marshal(1, m)
	if err != nil {
		if !isTypedError(err) {
			t.Fatalf("re-encoding %T: untyped error %v", m, err)
		}
		return
	}
	_, m2, _, err := DecodeMessage(b1)
	if err != nil {
		t.Fatalf("re-encoded %T does not decode: %v", m, err)
	}
	if b2, err := Marshal(1, m2); err != nil || !bytes.Equal(b1, b2) {
		t.Fatalf("encoding of %T not stable (%v):\n%x\n%x", m, err, b1, b2)
	}
}

// FuzzFlowRemoved fuzzes the OFPT_FLOW_REMOVED decoder.
func FuzzFlowRemoved(f *testing.F) {
	fuzzBodies(f, func(m Message) bool { _, ok := m.(*FlowRemoved); return ok })
	f.Fuzz(func(t *testing.T, body []byte) { fuzzOneDecoder(t, fuzzBody(typeFlowRemoved, body)) })
}

// FuzzGroupStats fuzzes the group stats request and reply decoders.
func FuzzGroupStats(f *testing.F) {
	fuzzBodies(f, func(m Message) bool {
		switch m.(type) {
		case *GroupStatsRequest, *GroupStatsReply:
			return true
		}
		return false
	})
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzOneDecoder(t, fuzzBody(typeMultipartReq, body))
		fuzzOneDecoder(t, fuzzBody(typeMultipartReply, body))
	})
}

// FuzzErrorMsg fuzzes the OFPT_ERROR decoder and the error naming.
func FuzzErrorMsg(f *testing.F) {
	fuzzBodies(f, func(m Message) bool { _, ok := m.(*ErrorMsg); return ok })
	f.Fuzz(func(t *testing.T, body []byte) {
		b := fuzzBody(typeError, body)
		fuzzOneDecoder(t, b)
		if _, m, _, err := DecodeMessage(b); err == nil {
			em := m.(*ErrorMsg)
			if ErrorName(em.Code, em.Experimenter) == "" {
				t.Fatal("empty error name")
			}
		}
	})
}
