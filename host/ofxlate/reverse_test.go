package ofxlate

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/host/flowstore"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/flow/flowtest"
)

// vocabReverse is the Reverse of plugin "p" of vocabArbiter.
func vocabReverse(t testing.TB, a *pipeline.Arbiter) *Reverse {
	p, _ := a.Plugin("p")
	fields := flow.WellKnownBits()
	for n, b := range p.Bits {
		fields[n] = b
	}
	return &Reverse{Owner: "p", Prefix: p.Prefix, Fields: fields, Table: func(id uint8) (string, bool) {
		tb, ok := a.TableByID(id)
		return tb.Name, ok
	}}
}

// readBack sends f through the wire as the switch returns it in a flow
// stats reply, and reverse-translates what decodes.
func readBack(t *testing.T, rev *Reverse, of openflow.Flow) *flow.Flow {
	t.Helper()
	b, err := openflow.Marshal(1, &openflow.FlowStatsReply{Flows: []openflow.FlowStats{{Flow: of, PacketCount: 3}}})
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	_, m, _, err := openflow.DecodeMessage(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	got, err := rev.FromFlow(&m.(*openflow.FlowStatsReply).Flows[0].Flow)
	if err != nil {
		t.Fatalf("reverse: %v", err)
	}
	return got
}

// roundTrip checks that f, installed, read back and resolved again, is the
// same switch flow and has the same resolved (ovs-ofctl) text.
func roundTrip(t *testing.T, a *pipeline.Arbiter, rev *Reverse, f *flow.Flow) {
	t.Helper()
	r, err := a.Resolve("p", f)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Flow(r)
	if err != nil {
		t.Fatal(err)
	}
	got := readBack(t, rev, want)
	if got.Table != f.Table || got.Tag != f.Tag || got.Priority != f.Priority {
		t.Errorf("read back %s, installed %s", got, f)
	}
	r2, err := a.Resolve("p", got)
	if err != nil {
		t.Fatalf("read-back flow %s does not resolve: %v", got, err)
	}
	again, err := Flow(r2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.String(), again.String()); diff != "" {
		t.Errorf("switch flow after a round trip (-installed +read back):\n%s", diff)
	}
	if diff := cmp.Diff(r.String(), r2.String()); diff != "" {
		t.Errorf("resolved text after a round trip (-installed +read back):\n%s", diff)
	}
}

// TestEveryActionReverses: every action type (flowtest.Actions) survives
// install, read-back (flow stats reply, decode, reverse) and resolving
// again. An action type added without a reverse case fails here, as
// TestEveryActionTranslates does for the forward way.
func TestEveryActionReverses(t *testing.T) {
	a := vocabArbiter(t)
	rev := vocabReverse(t, a)
	for _, s := range flowtest.Actions("next") {
		t.Run(s.Name, func(t *testing.T) {
			roundTrip(t, a, rev, &flow.Flow{Table: "class", Priority: 5, Tag: 3, Actions: []flow.Action{s.Action}})
		})
	}
}

// TestEveryMatchReverses does the same for every match kind.
func TestEveryMatchReverses(t *testing.T) {
	a := vocabArbiter(t)
	rev := vocabReverse(t, a)
	for _, s := range flowtest.Matches() {
		t.Run(s.Name, func(t *testing.T) {
			roundTrip(t, a, rev, &flow.Flow{Table: "class", Priority: 5, Match: s.Match})
		})
	}
}

// TestEveryBucketActionReverses: a select group hashing on chosen fields,
// with one bucket per action sample, read back from a group desc reply,
// reverses into a group that translates to the same group mod. A plugin's
// group read back by another plugin's Reverse is refused.
func TestEveryBucketActionReverses(t *testing.T) {
	a := vocabArbiter(t)
	rev := vocabReverse(t, a)
	p, _ := a.Plugin("p")
	ctx := &Context{Fields: rev.Fields, Table: func(j flow.Jump) (uint8, error) { return a.WritableTable("p", j) }}
	g := &flow.Group{ID: 1, Type: flow.GroupSelect, Selection: &flow.Selection{Method: flow.SelectHash,
		Fields: []flow.MatchKind{flow.MatchIPv4Src, flow.MatchTCPSrc, flow.MatchIPv6Dst}}}
	for i, s := range flowtest.Actions("next") {
		g.Buckets = append(g.Buckets, flow.Bucket{Weight: uint16(10 + i), Actions: []flow.Action{s.Action}})
	}
	entry := func(g *flow.Group) *flowstore.GroupEntry {
		return &flowstore.GroupEntry{Owner: "p", Global: pipeline.GroupID(p.Prefix, g.ID), Prefix: p.Prefix, Group: g}
	}
	want, err := GroupMod(flow.OpAdd, entry(g), ctx)
	if err != nil {
		t.Fatal(err)
	}
	desc := openflow.GroupDesc{Type: want.Type, GroupID: want.GroupID, Buckets: want.Buckets, Selection: want.Selection}
	b, err := openflow.Marshal(1, &openflow.GroupDescReply{Groups: []openflow.GroupDesc{desc}})
	if err != nil {
		t.Fatal(err)
	}
	_, m, _, err := openflow.DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	readDesc := &m.(*openflow.GroupDescReply).Groups[0]
	got, err := rev.FromGroup(readDesc)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != g.String() {
		t.Errorf("read back\n %s\ninstalled\n %s", got, g)
	}
	again, err := GroupMod(flow.OpAdd, entry(got), ctx)
	if err != nil {
		t.Fatal(err)
	}
	againDesc := openflow.GroupDesc{Type: again.Type, GroupID: again.GroupID, Buckets: again.Buckets, Selection: again.Selection}
	if diff := cmp.Diff(desc.String(), againDesc.String()); diff != "" {
		t.Errorf("group after a round trip (-installed +read back):\n%s", diff)
	}
	other := *rev
	other.Prefix++
	if _, err := other.FromGroup(readDesc); !errors.Is(err, sdk.ErrNotOwner) {
		t.Errorf("another plugin's group: %v", err)
	}
}

// FuzzReverse: whatever a flow stats or group desc reply decodes to, the
// reverse translation returns a flow or an error, never panics. Seeds are
// every action and match sample as the switch would send it back.
func FuzzReverse(f *testing.F) {
	a := vocabArbiter(f)
	rev := vocabReverse(f, a)
	seed := func(fl *flow.Flow) {
		r, err := a.Resolve("p", fl)
		if err != nil {
			f.Fatal(err)
		}
		of, err := Flow(r)
		if err != nil {
			f.Fatal(err)
		}
		b, err := openflow.Marshal(1, &openflow.FlowStatsReply{Flows: []openflow.FlowStats{{Flow: of}}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range flowtest.Actions("next") {
		seed(&flow.Flow{Table: "class", Priority: 5, Actions: []flow.Action{s.Action}})
	}
	for _, s := range flowtest.Matches() {
		seed(&flow.Flow{Table: "class", Priority: 5, Match: s.Match})
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, m, _, err := openflow.DecodeMessage(b)
		if err != nil {
			return
		}
		switch m := m.(type) {
		case *openflow.FlowStatsReply:
			for i := range m.Flows {
				if fl, err := rev.FromFlow(&m.Flows[i].Flow); err == nil {
					_ = fl.String()
				}
			}
		case *openflow.GroupDescReply:
			for i := range m.Groups {
				if g, err := rev.FromGroup(&m.Groups[i]); err == nil {
					_ = g.String()
				}
			}
		}
	})
}

// TestReverseRefusesWhatTheSDKCannotSay: switch actions with parameters
// the SDK has no form for are refused by name, not read back as something
// else.
func TestReverseRefusesWhatTheSDKCannotSay(t *testing.T) {
	a := vocabArbiter(t)
	rev := vocabReverse(t, a)
	for _, oa := range []openflow.Action{
		openflow.CT{Force: true, Commit: true},
		openflow.CT{Alg: 21},
		openflow.Controller{MaxLen: 128, ID: 3},
		openflow.Controller{Pause: true},
		openflow.Resubmit{Port: 5, Table: 90},
		openflow.Learn{Table: 90, Flags: openflow.LearnDeleteLearned},
		openflow.Set(openflow.Exact(openflow.FieldReg0+9, 1)),
	} {
		if got, err := rev.FromActions([]openflow.Action{oa}); err == nil {
			t.Errorf("%s read back as %v", oa, got)
		}
	}
}
