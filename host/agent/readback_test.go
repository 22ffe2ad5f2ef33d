package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/ofxlate"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// TestDeleteTagged: a delete-by-tag becomes strict deletes of exactly the
// owner's matching flows, in the same bundle as the rest of the batch,
// including flows the batch itself added before it; the store follows.
func TestDeleteTagged(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	register(t, a, "a", tVal, tRoute)
	register(t, a, "b", tOut)
	fl := func(table string, port uint32, tag uint32) flow.Flow {
		return flow.Flow{Table: table, Priority: 10, Match: flow.Match{}.InPort(port), Tag: tag}
	}
	if err := a.Apply(ctx, "a", flow.NewBatch().AddFlows(fl("a.val", 1, 0x101), fl("a.val", 2, 0x102), fl("c.route", 3, 0x101), fl("c.route", 4, 0x201)), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	// b writes into a's exported table with the same tag: never touched by a's delete.
	if err := a.Apply(ctx, "b", flow.NewBatch().AddFlows(fl("a.val", 9, 0x101)), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	before := len(a.Flows("a"))
	b := flow.NewBatch().AddFlows(fl("a.val", 5, 0x101)).DeleteTagged("", 0x101, 0xffff).AddFlows(fl("a.val", 6, 0x101))
	if err := a.Apply(ctx, "a", b, config.Limits{}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ADD cookie=0x1000100000101, table=30, priority=10,in_port=5 actions=drop",
		"DEL_STRICT cookie=0x1000100000101, table=30, priority=10,in_port=1 actions=drop",
		"DEL_STRICT cookie=0x1000100000101, table=90, priority=10,in_port=3 actions=drop",
		"DEL_STRICT cookie=0x1000100000101, table=30, priority=10,in_port=5 actions=drop",
		"ADD cookie=0x1000100000101, table=30, priority=10,in_port=6 actions=drop",
	}
	got := sw.lastTexts()
	// The store's order among the deleted flows is not specified.
	if diff := cmp.Diff(want[0], got[0]); diff != "" || len(got) != len(want) || got[4] != want[4] {
		t.Errorf("bundle:\n%s", strings.Join(got, "\n"))
	}
	if !cmp.Equal(sortedCopy(want[1:4]), sortedCopy(got[1:4])) {
		t.Errorf("deletes:\n%s", strings.Join(got[1:4], "\n"))
	}
	if n := len(a.Flows("a")); n != before-2+1 {
		t.Errorf("store holds %d flows of a, want %d", n, before-1)
	}
	if n := len(a.Flows("b")); n != 1 {
		t.Errorf("b's flow was touched: %d flows", n)
	}
	// In one table only, with a mask.
	if err := a.Apply(ctx, "a", flow.NewBatch().DeleteTagged("c.route", 0x200, 0xff00), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"DEL_STRICT cookie=0x1000100000201, table=90, priority=10,in_port=4 actions=drop"}, sw.lastTexts()); diff != "" {
		t.Errorf("masked delete (-want +got):\n%s", diff)
	}
	err := a.Apply(ctx, "a", flow.NewBatch().DeleteTagged("nope", 1, 1), config.Limits{})
	if !errors.Is(err, sdk.ErrUnknownTable) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown table: %v", err)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestReadFlows: the request selects the owner's cookie prefix, the tag
// under its mask and the table; the answer comes back in the owner's terms.
func TestReadFlows(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	register(t, a, "a", tVal, tRoute)
	register(t, a, "b", tOut)
	f := flow.Flow{Table: "a.val", Priority: 10, Match: flow.Match{}.InPort(1).Field(flow.FieldPacketSource, 1), Tag: 0x42,
		Actions: []flow.Action{flow.DecTTL()}, Goto: flow.NextTable()}
	a.mu.Lock()
	r, err := a.arb.Resolve("a", &f)
	a.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	of, err := ofxlate.Flow(r)
	if err != nil {
		t.Fatal(err)
	}
	sw.dump = []openflow.FlowStats{{Flow: of, PacketCount: 5, ByteCount: 500, DurationSec: 2}}
	got, err := a.ReadFlows(ctx, "a", sdk.FlowFilter{Table: "a.val", Tag: 0x42, TagMask: 0xff})
	if err != nil {
		t.Fatal(err)
	}
	req := sw.dumpReq[len(sw.dumpReq)-1]
	if req.Table != r.TableID || req.Cookie != pipeline.Cookie(1, 0, 0x42) || req.CookieMask != pipeline.CookiePrefixMask|0xff {
		t.Errorf("flow stats request %+v", req)
	}
	if len(got) != 1 || got[0].Packets != 5 || got[0].Flow.Key() != f.Key() || got[0].Flow.Goto != flow.GotoTable("c.route") {
		t.Fatalf("read back %+v", got)
	}
	// A private table of another plugin is refused, named.
	_, err = a.ReadFlows(ctx, "a", sdk.FlowFilter{Table: "b.out"})
	if !errors.Is(err, sdk.ErrNotOwner) || !strings.Contains(err.Error(), `"b.out"`) || !strings.Contains(err.Error(), `plugin "a"`) {
		t.Errorf("private table: %v", err)
	}
}

// TestGroupStatsOnlyOwn: another plugin's groups never come back, and a
// missing ID is named.
func TestGroupStatsOnlyOwn(t *testing.T) {
	ctx := context.Background()
	a, sw, _ := newTestAgent(t)
	register(t, a, "a", tVal)
	register(t, a, "b", tOut)
	sw.groups = []openflow.GroupStats{{GroupID: pipeline.GroupID(1, 3), PacketCount: 4}, {GroupID: pipeline.GroupID(2, 3), PacketCount: 9}}
	gs, err := a.GroupStats(ctx, "a")
	if err != nil || len(gs) != 1 || gs[0].ID != 3 || gs[0].Packets != 4 {
		t.Fatalf("GroupStats(a) = %+v, %v", gs, err)
	}
	if _, err := a.GroupStats(ctx, "a", 3, 7); !errors.Is(err, sdk.ErrNotFound) || !strings.Contains(err.Error(), "[7]") {
		t.Errorf("missing group: %v", err)
	}
}

// TestPacketInMeta: registers come back as the owner's named fields and
// the well-known ones, the ct state and tuple as CTInfo.
func TestPacketInMeta(t *testing.T) {
	mark := flow.Bits{Reg: 2, Offset: 4, Width: 8}
	fields := flow.WellKnownBits()
	fields["mark"] = mark
	m := openflow.Match{openflow.InPort(7), openflow.Reg(0, 0x12, 0xffffffff), openflow.Reg(2, 0xab0, 0xffffffff),
		openflow.Exact(openflow.FieldCTState, uint64(flow.CTTracked|flow.CTEstablished)), openflow.Exact(openflow.FieldCTZone, 5),
		openflow.Exact(openflow.FieldCTMark, 9), openflow.Uint128(openflow.FieldCTLabel, 0, 1, ^uint64(0), ^uint64(0)),
		openflow.Exact(openflow.FieldCTNwProto, 6), openflow.Exact(openflow.FieldCTTpDst, 80)}
	m = append(m, openflow.Bytes(openflow.FieldCTNwSrc, []byte{10, 0, 0, 1}, nil), openflow.Bytes(openflow.FieldCTNwDst, []byte{10, 0, 0, 2}, nil))
	var req sdk.PacketInRequest
	packetInMeta(&req, m, fields)
	if req.InPort != 7 || req.Field(flow.FieldPacketSource) != 2 || req.Field(flow.FieldOutputReady) != 1 || req.Fields["mark"] != 0xab || req.Field(flow.FieldTargetPort) != 0 {
		t.Errorf("fields %v, in_port %d", req.Fields, req.InPort)
	}
	ct := req.CT
	if ct.State != flow.CTTracked|flow.CTEstablished || ct.Zone != 5 || ct.Mark != 9 || ct.Label[15] != 1 || ct.Tuple == nil ||
		ct.Tuple.Src.String() != "10.0.0.1" || ct.Tuple.Dst.String() != "10.0.0.2" || ct.Tuple.Proto != 6 || ct.Tuple.DstPort != 80 {
		t.Errorf("ct %+v tuple %+v", ct, ct.Tuple)
	}
}

// TestResumeTable: a packet-out may resume at the plugin's own or an
// exported table; another plugin's private table is refused, named.
func TestResumeTable(t *testing.T) {
	a, _, _ := newTestAgent(t)
	register(t, a, "a", tVal)
	register(t, a, "b", tOut, tRoute)
	a.mu.Lock()
	defer a.mu.Unlock()
	if id, err := a.resumeTableLocked("b", "a.val"); err != nil || id != 30 {
		t.Errorf("exported table: %d, %v", id, err)
	}
	if _, err := a.resumeTableLocked("a", "b.out"); !errors.Is(err, sdk.ErrNotOwner) || !strings.Contains(err.Error(), `plugin "a"`) || !strings.Contains(err.Error(), `"b.out"`) {
		t.Errorf("private table: %v", err)
	}
	if _, err := a.resumeTableLocked("a", "x"); !errors.Is(err, sdk.ErrUnknownTable) {
		t.Errorf("unknown table: %v", err)
	}
}

// TestFlowRemovedForgets: a timed-out flow leaves the store; a removal
// whose cookie no longer matches (the flow was re-added by a newer round)
// and a removal by delete leave it alone.
func TestFlowRemovedForgets(t *testing.T) {
	ctx := context.Background()
	a, _, _ := newTestAgent(t)
	register(t, a, "a", tVal)
	mark := flow.FieldPacketSource
	f := flow.Flow{Table: "a.val", Priority: 10, IdleTimeout: 5, Match: flow.Match{}.InPort(1).Field(mark, 1), Tag: 3}
	if err := a.Apply(ctx, "a", flow.NewBatch().AddFlows(f), config.Limits{}); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	r, _ := a.arb.Resolve("a", &f)
	a.mu.Unlock()
	of, err := ofxlate.Flow(r)
	if err != nil {
		t.Fatal(err)
	}
	if of.Flags&openflow.FlagSendFlowRem == 0 {
		t.Errorf("a flow with a timeout does not ask for FLOW_REMOVED: %s", of.String())
	}
	n := len(a.Flows("a"))
	stale := of
	stale.Cookie++
	a.flowRemoved(ctx, &openflow.FlowRemoved{Reason: openflow.RemovedIdleTimeout, Flow: stale})
	a.flowRemoved(ctx, &openflow.FlowRemoved{Reason: openflow.RemovedDelete, Flow: of})
	if got := len(a.Flows("a")); got != n {
		t.Fatalf("store dropped a flow on a stale or delete removal: %d -> %d", n, got)
	}
	a.flowRemoved(ctx, &openflow.FlowRemoved{Reason: openflow.RemovedIdleTimeout, Flow: of})
	if got := len(a.Flows("a")); got != n-1 {
		t.Errorf("store holds %d flows after the timeout, want %d", got, n-1)
	}
}
