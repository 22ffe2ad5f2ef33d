package openflow

import (
	"context"
	"errors"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	of "switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/itest/ovs"
)

var cmpOpts = []cmp.Option{cmpopts.EquateEmpty(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })}

// startSwitch starts a private OVS with bridge br-int and connects to it.
func startSwitch(t *testing.T, name string, opts of.Options) (*ovs.Switch, *of.Conn) {
	t.Helper()
	sw, c := startSwitchEvents(t, name, opts)
	go func() {
		for range c.Events() {
		}
	}()
	return sw, c
}

// startSwitchEvents is startSwitch leaving Events to the caller.
func startSwitchEvents(t *testing.T, name string, opts of.Options) (*ovs.Switch, *of.Conn) {
	t.Helper()
	sw := ovs.Start(t, ovs.Options{Name: name})
	sw.AddBridge(t, "br-int")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := of.Dial(ctx, "unix", sw.MgmtSocket("br-int"), opts)
	if err != nil {
		t.Fatalf("Dial %s: %v", sw.MgmtSocket("br-int"), err)
	}
	t.Cleanup(func() { c.Close() })
	return sw, c
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// richFlows exercises many fields and actions on a live switch.
func richFlows() []of.Flow {
	ip := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	return []of.Flow{
		{Table: 0, Priority: 0, Cookie: 0x1_0000_0001, Instructions: []of.Instruction{of.Goto(10)}},
		{Table: 10, Priority: 100, Cookie: 0x1_0000_0002, Match: of.Match{of.InPort(of.PortLocal), of.EthType(0x0806), of.Exact(of.FieldARPOp, 1)},
			Instructions: []of.Instruction{of.Apply(of.Output{Port: of.PortNormal})}},
		{Table: 10, Priority: 200, Cookie: 0x2_0000_0001, Match: of.Match{of.EthType(0x0800), of.CTState(0, of.CTTrk)},
			Instructions: []of.Instruction{of.Apply(of.CT{Recirc: true, Table: 20, Zone: 7})}},
		{Table: 20, Priority: 200, Cookie: 0x2_0000_0002, Match: of.Match{of.EthType(0x0800), of.CTState(of.CTTrk|of.CTNew, of.CTInv), of.IPProto(6), of.Exact(of.FieldTCPDst, 80)},
			Instructions: []of.Instruction{of.Apply(of.CT{Commit: true, Zone: 7, NAT: &of.NAT{Flags: of.NATDst, MinAddr: ip("10.0.0.5"), MinPort: 8080}, Exec: []of.Action{of.Set(of.Masked(of.FieldCTMark, 1, 1))}}), of.Goto(30)}},
		{Table: 20, Priority: 190, Cookie: 0x2_0000_0003, Match: of.Match{of.EthType(0x0800), of.Prefix(of.FieldIPv4Src, netip.MustParsePrefix("10.1.0.0/16"))},
			Instructions: []of.Instruction{of.Apply(of.Conjunction{ID: 5, Clause: 1, NClauses: 2})}},
		{Table: 20, Priority: 190, Cookie: 0x2_0000_0004, Match: of.Match{of.Exact(of.FieldConjID, 5), of.EthType(0x0800)},
			Instructions: []of.Instruction{of.Apply(of.Load(of.FieldReg3, 0, 8, 9)), of.WriteMetadata{Metadata: 0x10, Mask: 0xff}, of.Goto(30)}},
		{Table: 30, Priority: 100, Cookie: 0x3_0000_0001, IdleTimeout: 300, Match: of.Match{of.EthType(0x86dd), of.IPProto(17), of.Exact(of.FieldUDPDst, 53)},
			Instructions: []of.Instruction{of.Apply(of.Move{Src: of.Whole(of.FieldEthSrc), Dst: of.Whole(of.FieldEthDst)}, of.Controller{Reason: of.ReasonAction, Userdata: []byte{1, 2, 3, 4, 5, 6}}, of.Note{Data: []byte{0xca, 0xfe, 0, 0, 0, 0}})}},
		{Table: 30, Priority: 90, Cookie: 0x3_0000_0002, Match: of.Match{of.EthType(0x0800), of.IPProto(6), of.Reg(1, 0x20, 0xf0)},
			Instructions: []of.Instruction{of.Apply(of.Learn{Table: 40, HardTimeout: 60, Priority: 200, Flags: of.LearnDeleteLearned, Cookie: 0x3_0000_0003, Specs: []of.LearnSpec{
				{Kind: of.LearnMatch, Imm: 0x800, Dst: of.Whole(of.FieldEthType)},
				{Kind: of.LearnMatch, Src: of.Whole(of.FieldIPv4Src), Dst: of.Whole(of.FieldIPv4Src)},
				{Kind: of.LearnLoad, Src: of.Bits(of.FieldReg4, 0, 16), Dst: of.Bits(of.FieldReg4, 0, 16)},
			}}, of.ResubmitTable(40), of.OutputReg{Src: of.Bits(of.FieldReg1, 0, 16)})}},
		{Table: 40, Priority: 5, Cookie: 0x3_0000_0004, Match: of.Match{of.Uint128(of.FieldXXReg0, 0, 7, 0, 0xff), of.Exact(of.FieldTunID, 0x64), of.Addr(of.FieldTunIPv4Dst, ip("192.168.1.2"))},
			Instructions: []of.Instruction{of.Apply(of.Set(of.Addr(of.FieldTunIPv4Dst, ip("192.168.1.3"))), of.PushVLAN{EtherType: 0x8100}, of.Output{Port: of.PortInPort})}},
	}
}

func dumpOfctl(t *testing.T, sw *ovs.Switch) []string {
	t.Helper()
	return parseDump(sw.Ofctl(t, "--no-stats", "--no-names", "dump-flows", "br-int"))
}

func dumpOurs(t *testing.T, c *of.Conn, req of.FlowStatsRequest) []of.Flow {
	t.Helper()
	st, err := c.DumpFlows(ctxT(t, 20*time.Second), req)
	if err != nil {
		t.Fatalf("DumpFlows: %v", err)
	}
	out := make([]of.Flow, len(st))
	for i := range st {
		out[i] = st[i].Flow
	}
	return out
}

func normalize(flows []of.Flow) []of.Flow {
	out := make([]of.Flow, len(flows))
	for i, f := range flows {
		f.Match = f.Match.Normalize()
		if len(f.Match) == 0 {
			f.Match = nil
		}
		out[i] = f
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func TestInstallDumpDelete(t *testing.T) {
	sw, c := startSwitch(t, "of-install", of.Options{})
	flows := richFlows()
	if err := c.BundleFlows(ctxT(t, 20*time.Second), adds(flows), true); err != nil {
		t.Fatalf("BundleFlows: %v", err)
	}
	if diff := cmp.Diff(texts(flows), dumpOfctl(t, sw)); diff != "" {
		t.Fatalf("ovs-ofctl dump-flows differs from installed flows (-want +got):\n%s", diff)
	}
	got := dumpOurs(t, c, of.FlowStatsRequest{Table: of.TableAll})
	if diff := cmp.Diff(normalize(flows), normalize(got), cmpOpts...); diff != "" {
		t.Fatalf("our flow stats differ from installed flows (-want +got):\n%s", diff)
	}

	// The cookie-only dump (the agent's foreign sweep) sees the same flows.
	cookies, err := c.DumpCookies(ctxT(t, 20*time.Second), of.FlowStatsRequest{Table: of.TableAll})
	if err != nil {
		t.Fatalf("DumpCookies: %v", err)
	}
	var wantCookies []of.FlowCookie
	for _, f := range got {
		wantCookies = append(wantCookies, of.FlowCookie{Table: f.Table, Cookie: f.Cookie})
	}
	if diff := cmp.Diff(wantCookies, cookies); diff != "" {
		t.Fatalf("DumpCookies differs from DumpFlows (-want +got):\n%s", diff)
	}

	// Flow stats filtered by table and cookie/mask.
	got = dumpOurs(t, c, of.FlowStatsRequest{Table: 20, Cookie: 0x2_0000_0000, CookieMask: 0xffff_ffff_0000_0000})
	var want []of.Flow
	for _, f := range flows {
		if f.Table == 20 && f.Cookie>>32 == 2 {
			want = append(want, f)
		}
	}
	if diff := cmp.Diff(normalize(want), normalize(got), cmpOpts...); diff != "" {
		t.Fatalf("filtered flow stats (-want +got):\n%s", diff)
	}

	// Delete everything whose cookie has high word 2, in all tables.
	del := &of.FlowMod{Command: of.FlowDelete, Flow: of.Flow{Table: of.TableAll, Cookie: 0x2_0000_0000}, CookieMask: 0xffff_ffff_0000_0000}
	if _, err := c.Request(ctxT(t, 10*time.Second), del); err != nil {
		t.Fatalf("delete by cookie: %v", err)
	}
	want = nil
	for _, f := range flows {
		if f.Cookie>>32 != 2 {
			want = append(want, f)
		}
	}
	if diff := cmp.Diff(texts(want), dumpOfctl(t, sw)); diff != "" {
		t.Fatalf("after delete by cookie, dump-flows (-want +got):\n%s", diff)
	}

	// Strict delete removes exactly one flow.
	victim := want[1]
	ds := &of.FlowMod{Command: of.FlowDeleteStrict, Flow: of.Flow{Table: victim.Table, Priority: victim.Priority, Match: victim.Match}}
	if _, err := c.Request(ctxT(t, 10*time.Second), ds); err != nil {
		t.Fatalf("delete strict: %v", err)
	}
	want = append(want[:1:1], want[2:]...)
	if diff := cmp.Diff(texts(want), dumpOfctl(t, sw)); diff != "" {
		t.Fatalf("after strict delete, dump-flows (-want +got):\n%s", diff)
	}

	// Modify replaces actions of matching flows.
	mod := &of.FlowMod{Command: of.FlowModifyStrict, Flow: of.Flow{Table: 0, Priority: 0, Instructions: []of.Instruction{of.Goto(30)}}}
	if _, err := c.Request(ctxT(t, 10*time.Second), mod); err != nil {
		t.Fatalf("modify strict: %v", err)
	}
	want[0].Instructions = []of.Instruction{of.Goto(30)}
	if diff := cmp.Diff(texts(want), dumpOfctl(t, sw)); diff != "" {
		t.Fatalf("after modify, dump-flows (-want +got):\n%s", diff)
	}
}

func TestAtomicBundleFailureLeavesSwitchUnchanged(t *testing.T) {
	sw, c := startSwitch(t, "of-atomic", of.Options{})
	base := mixedFlows(5, 0x7, 50)
	if err := c.BundleFlows(ctxT(t, 20*time.Second), adds(base), true); err != nil {
		t.Fatalf("installing base flows: %v", err)
	}
	before := dumpOfctl(t, sw)
	if len(before) != len(base) {
		t.Fatalf("dump-flows shows %d flows, want %d", len(before), len(base))
	}
	batch := adds(mixedFlows(6, 0x8, 20))
	// Index 13: goto_table backwards, which the switch rejects.
	batch[13].Flow.Instructions = []of.Instruction{of.Goto(2)}
	// Also delete the base flows in the same bundle: must not happen.
	batch = append([]of.FlowMod{{Command: of.FlowDelete, Flow: of.Flow{Table: of.TableAll}}}, batch...)
	err := c.BundleFlows(ctxT(t, 20*time.Second), batch, true)
	var se *of.SwitchError
	if !errors.As(err, &se) {
		t.Fatalf("BundleFlows with a bad flow: got %v, want *SwitchError", err)
	}
	if se.Index != 14 {
		t.Errorf("SwitchError.Index = %d, want 14 (the bad flow); err: %v", se.Index, err)
	}
	if !errors.Is(err, of.ErrorCode{Type: 3, Code: 2}) { // OFPBIC_BAD_TABLE_ID
		t.Errorf("error %v: want OFPBIC_BAD_TABLE_ID", err)
	}
	t.Logf("switch error: %v", err)
	if diff := cmp.Diff(before, dumpOfctl(t, sw)); diff != "" {
		t.Fatalf("switch changed by failed atomic bundle (-before +after):\n%s", diff)
	}

	// A failure only the commit can detect (an overlap with a flow that
	// is already installed) also rolls the whole bundle back.
	batch = adds(mixedFlows(6, 0x8, 20))
	overlap := of.FlowMod{Command: of.FlowAdd, Flow: base[7]}
	overlap.Flow.Match = of.Match{of.EthType(0x0800), of.Prefix(of.FieldIPv4Dst, netip.MustParsePrefix("10.0.0.0/24"))}
	overlap.Flow.Flags = of.FlagCheckOverlap
	overlap.Flow.Instructions = []of.Instruction{of.Apply(of.Output{Port: 1})}
	batch = append([]of.FlowMod{{Command: of.FlowDelete, Flow: of.Flow{Table: 6}}}, append(batch, overlap)...)
	err = c.BundleFlows(ctxT(t, 20*time.Second), batch, true)
	if !errors.As(err, &se) || se.Index != len(batch)-1 || !errors.Is(err, of.ErrCodeOverlap) {
		t.Fatalf("bundle with overlapping flow: got %v, want OFPFMFC_OVERLAP at index %d", err, len(batch)-1)
	}
	t.Logf("switch error: %v", err)
	if diff := cmp.Diff(before, dumpOfctl(t, sw)); diff != "" {
		t.Fatalf("switch changed by failed atomic bundle (-before +after):\n%s", diff)
	}

	// A plain failing flow mod reports the switch's error to its caller.
	bad := &of.FlowMod{Command: of.FlowAdd, Flow: of.Flow{Table: 1, Instructions: []of.Instruction{of.Apply(of.Group{ID: 99})}}}
	_, err = c.Request(ctxT(t, 10*time.Second), bad)
	if !errors.As(err, &se) || se.Code.TypeName() != "OFPET_BAD_ACTION" {
		t.Fatalf("flow with missing group: got %v, want OFPET_BAD_ACTION switch error", err)
	}
	t.Logf("switch error: %v", err)
}

func TestLargeNonAtomicBatchIsSplit(t *testing.T) {
	sw, c := startSwitch(t, "of-split", of.Options{BundleLimit: 1000})
	flows := mixedFlows(3, 0x9, 4500)
	if err := c.BundleFlows(ctxT(t, 60*time.Second), adds(flows), false); err != nil {
		t.Fatalf("BundleFlows: %v", err)
	}
	if diff := cmp.Diff(texts(flows), dumpOfctl(t, sw)); diff != "" {
		t.Fatalf("dump-flows (-want +got):\n%s", diff)
	}
	// An atomic batch over the limit is not split: one bundle, all or nothing.
	more := adds(mixedFlows(4, 0x9, 4500))
	more[4499].Flow.Instructions = []of.Instruction{of.Goto(1)} // backwards: rejected
	var se *of.SwitchError
	if err := c.BundleFlows(ctxT(t, 30*time.Second), more, true); !errors.As(err, &se) || se.Index != 4499 {
		t.Fatalf("atomic batch over the bundle limit with a bad last flow: got %v, want SwitchError at index 4499", err)
	}
	if diff := cmp.Diff(texts(flows), dumpOfctl(t, sw)); diff != "" {
		t.Fatalf("failed atomic batch changed the switch (-want +got):\n%s", diff)
	}
	// A non-atomic batch with the same bad flow keeps the bundles before it.
	err := c.BundleFlows(ctxT(t, 30*time.Second), more, false)
	if !errors.As(err, &se) || se.Index != 4499 {
		t.Fatalf("non-atomic batch with a bad last flow: got %v, want SwitchError at index 4499", err)
	}
	if got, want := len(dumpOfctl(t, sw)), len(flows)+4000; got != want {
		t.Fatalf("after non-atomic batch failing in its last bundle: %d flows, want %d", got, want)
	}
}

func TestGroupsAndMeters(t *testing.T) {
	sw, c := startSwitch(t, "of-groups", of.Options{})
	ctx := ctxT(t, 20*time.Second)
	g := &of.GroupMod{Command: of.GroupAdd, Type: of.GroupTypeSelect, GroupID: 5,
		Selection: &of.GroupSelection{Method: "hash", Fields: []of.Field{of.FieldIPv4Src, of.FieldTCPSrc}}, Buckets: []of.Bucket{
			{ID: 0, Weight: 100, Actions: []of.Action{of.ResubmitTable(10)}},
			{ID: 1, Weight: 50, Actions: []of.Action{of.Output{Port: of.PortLocal}}}}}
	if _, err := c.Request(ctx, g); err != nil {
		t.Fatalf("group add: %v", err)
	}
	if _, err := c.Request(ctx, g); !errors.Is(err, of.ErrCodeGroupExists) {
		t.Fatalf("adding the group twice: got %v, want OFPGMFC_GROUP_EXISTS", err)
	}
	gs, err := c.GroupDesc(ctx, of.GroupAll)
	if err != nil {
		t.Fatalf("GroupDesc: %v", err)
	}
	if diff := cmp.Diff([]of.GroupDesc{{Type: g.Type, GroupID: g.GroupID, Buckets: g.Buckets, Selection: g.Selection}}, gs, cmpOpts...); diff != "" {
		t.Errorf("group desc (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{gs[0].String()}, parseDump(sw.Ofctl(t, "--no-names", "dump-groups", "br-int"))); diff != "" {
		t.Errorf("ovs-ofctl dump-groups differs from GroupDesc.String (-ours +ovs):\n%s", diff)
	}
	m := &of.MeterMod{Command: of.MeterAdd, Flags: of.MeterPktps | of.MeterFlagStats, MeterID: 3, Bands: []of.MeterBand{{Type: 1, Rate: 1000}}}
	if _, err := c.Request(ctx, m); err != nil {
		t.Fatalf("meter add: %v", err)
	}
	flow := of.FlowMod{Command: of.FlowAdd, Flow: of.Flow{Table: 1, Priority: 5, Instructions: []of.Instruction{of.Apply(of.Meter{ID: 3}, of.Group{ID: 5})}}}
	if err := c.BundleFlows(ctx, []of.FlowMod{flow}, true); err != nil {
		t.Fatalf("flow using meter and group: %v", err)
	}
	ms, err := c.MeterStats(ctx, of.MeterAll)
	if err != nil {
		t.Fatalf("MeterStats: %v", err)
	}
	if len(ms) != 1 || ms[0].MeterID != 3 || ms[0].FlowCount != 1 || len(ms[0].Bands) != 1 {
		t.Errorf("meter stats = %+v, want meter 3 with 1 flow and 1 band", ms)
	}
	grs, err := c.GroupStats(ctx, of.GroupAll)
	if err != nil {
		t.Fatalf("GroupStats: %v", err)
	}
	if len(grs) != 1 || grs[0].GroupID != 5 || grs[0].RefCount != 1 || len(grs[0].Buckets) != 2 {
		t.Errorf("group stats = %+v, want group 5 used by 1 flow with 2 buckets", grs)
	}
	ports, err := c.PortDesc(ctx)
	if err != nil {
		t.Fatalf("PortDesc: %v", err)
	}
	if len(ports) != 1 || ports[0].Name != "br-int" || ports[0].PortNo != of.PortLocal {
		t.Errorf("ports = %+v, want just the LOCAL port br-int", ports)
	}
}

func TestPacketInAndOut(t *testing.T) {
	sw, c := startSwitchEvents(t, "of-pktin", of.Options{AsyncEvents: true, ControllerID: 3})
	ctx := ctxT(t, 20*time.Second)
	// A packet-out through a table whose flow sends it, with userdata, to
	// controller id 3: this connection (NXT_SET_CONTROLLER_ID).
	flow := of.FlowMod{Command: of.FlowAdd, Flow: of.Flow{Table: 0, Priority: 10, Cookie: 0xabc, Match: of.Match{of.EthType(0x88b5)},
		Instructions: []of.Instruction{of.Apply(of.Load(of.FieldReg0, 0, 32, 0x77), of.Controller{Reason: of.ReasonAction, ID: 3, Userdata: []byte{0xde, 0xad}})}}}
	if err := c.BundleFlows(ctx, []of.FlowMod{flow}, true); err != nil {
		t.Fatalf("install: %v", err)
	}
	pkt := append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0a, 0x58, 0, 0, 0, 1, 0x88, 0xb5}, make([]byte, 50)...)
	if _, err := c.Request(ctx, &of.PacketOut{InPort: of.PortLocal, Actions: []of.Action{of.Output{Port: of.PortTable}}, Data: pkt}); err != nil {
		t.Fatalf("packet out: %v", err)
	}
	ev := waitEvent(t, c, of.EventPacketIn, 10*time.Second)
	pi := ev.PacketIn
	if !pi.NX2 || pi.Cookie != 0xabc || pi.Table != 0 || pi.Reason != of.ReasonAction {
		t.Errorf("packet-in header = nx2 %v cookie %#x table %d reason %v, want nx2 cookie 0xabc table 0 reason action", pi.NX2, pi.Cookie, pi.Table, pi.Reason)
	}
	if diff := cmp.Diff([]byte{0xde, 0xad}, pi.Userdata); diff != "" {
		t.Errorf("userdata (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(pkt, pi.Data); diff != "" {
		t.Errorf("packet data (-want +got):\n%s", diff)
	}
	wantMeta := of.Match{of.InPort(of.PortLocal), of.Exact(of.FieldReg0, 0x77)}.Normalize()
	var gotMeta of.Match
	for _, f := range pi.Match {
		if f.Field == of.FieldInPort || f.Field == of.FieldReg0 {
			gotMeta = append(gotMeta, f)
		}
	}
	if diff := cmp.Diff(wantMeta, gotMeta); diff != "" {
		t.Errorf("packet-in metadata (-want +got):\n%s", diff)
	}

	// controller(pause) hands us a continuation; resuming it runs the rest
	// of the actions, here a second controller action with other userdata.
	pause := of.FlowMod{Command: of.FlowAdd, Flow: of.Flow{Table: 0, Priority: 10, Match: of.Match{of.EthType(0x88b6)},
		Instructions: []of.Instruction{of.Apply(of.Controller{Reason: of.ReasonAction, ID: 3, Userdata: []byte{1}, Pause: true}, of.Controller{Reason: of.ReasonAction, ID: 3, Userdata: []byte{2}})}}}
	if err := c.BundleFlows(ctx, []of.FlowMod{pause}, true); err != nil {
		t.Fatalf("install pause flow: %v", err)
	}
	pkt2 := append(append([]byte(nil), pkt[:12]...), append([]byte{0x88, 0xb6}, pkt[14:]...)...)
	if _, err := c.Request(ctx, &of.PacketOut{InPort: of.PortLocal, Actions: []of.Action{of.Output{Port: of.PortTable}}, Data: pkt2}); err != nil {
		t.Fatalf("packet out: %v", err)
	}
	paused := waitEvent(t, c, of.EventPacketIn, 10*time.Second).PacketIn
	if len(paused.Continuation) == 0 || !cmp.Equal(paused.Userdata, []byte{1}) {
		t.Fatalf("paused packet-in: userdata %x continuation %d bytes, want userdata 01 and a continuation", paused.Userdata, len(paused.Continuation))
	}
	t.Logf("continuation: %x", paused.Continuation)
	if _, err := c.Request(ctx, &of.Resume{PacketIn: *paused}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	resumed := waitEvent(t, c, of.EventPacketIn, 10*time.Second).PacketIn
	if !cmp.Equal(resumed.Userdata, []byte{2}) || len(resumed.Continuation) != 0 {
		t.Fatalf("after resume: userdata %x continuation %d bytes, want userdata 02 and no continuation", resumed.Userdata, len(resumed.Continuation))
	}

	// Adding a port is reported as PORT_STATUS.
	sw.Vsctl(t, "add-port", "br-int", "p1", "--", "set", "interface", "p1", "type=internal", "ofport_request=7")
	ev = waitEvent(t, c, of.EventPortStatus, 10*time.Second)
	if ps := ev.PortStatus; ps.Reason != 0 || ps.Port.Name != "p1" || ps.Port.PortNo != 7 {
		t.Errorf("port status = %+v, want ADD of p1 as port 7", ps)
	}

	// Role request round trip.
	rep, err := c.Request(ctx, &of.RoleRequest{Role: of.RoleMaster, GenerationID: 1})
	if err != nil {
		t.Fatalf("role request: %v", err)
	}
	if rr, ok := rep.(*of.RoleReply); !ok || rr.Role != of.RoleMaster {
		t.Errorf("role reply = %#v, want RoleReply{Role: RoleMaster}", rep)
	}
}

// waitEvent reads Events until one of kind arrives.
func waitEvent(t *testing.T, c *of.Conn, kind of.EventKind, d time.Duration) of.Event {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("Events closed while waiting for event kind %d", kind)
			}
			if ev.Kind == kind {
				return ev
			}
			t.Logf("event %+v", ev)
		case <-timeout:
			t.Fatalf("no event of kind %d within %v", kind, d)
		}
	}
}

func TestReconnectAfterVswitchdRestart(t *testing.T) {
	sw, c := startSwitchEvents(t, "of-restart", of.Options{EchoInterval: time.Second, ReconnectMin: 50 * time.Millisecond, ReconnectMax: 500 * time.Millisecond})
	waitEvent(t, c, of.EventConnected, 5*time.Second)
	flows := mixedFlows(2, 0x5, 10)
	if err := c.BundleFlows(ctxT(t, 10*time.Second), adds(flows), true); err != nil {
		t.Fatalf("install: %v", err)
	}
	sw.KillVswitchd(t)
	ev := waitEvent(t, c, of.EventDisconnected, 10*time.Second)
	t.Logf("disconnected: %v", ev.Err)
	// A request made while the switch is down waits for the reconnect.
	done := make(chan error, 1)
	go func() { done <- c.Barrier(ctxT(t, 30*time.Second)) }()
	sw.StartVswitchd(t)
	sw.AddBridgeWait(t, "br-int")
	ev = waitEvent(t, c, of.EventConnected, 30*time.Second)
	if !ev.Reconnect {
		t.Errorf("EventConnected after restart: Reconnect = false, want true")
	}
	if err := <-done; err != nil {
		t.Fatalf("barrier across the restart: %v", err)
	}
	// The restarted switch lost its flows; replaying them works.
	if got := dumpOfctl(t, sw); len(got) != 0 {
		t.Fatalf("restarted switch still has flows: %v", got)
	}
	if err := c.BundleFlows(ctxT(t, 10*time.Second), adds(flows), true); err != nil {
		t.Fatalf("replay after restart: %v", err)
	}
	if diff := cmp.Diff(texts(flows), dumpOfctl(t, sw)); diff != "" {
		t.Fatalf("after replay, dump-flows (-want +got):\n%s", diff)
	}
}

// TestFlowRemovedOnTimeout: a flow with send_flow_rem and an idle timeout
// comes back as EventFlowRemoved once the switch times it out; a flow we
// delete ourselves does not (AsyncEvents asks for timeouts only).
func TestFlowRemovedOnTimeout(t *testing.T) {
	_, c := startSwitchEvents(t, "of-flowrem", of.Options{AsyncEvents: true})
	ctx := ctxT(t, 20*time.Second)
	idle := of.Flow{Table: 2, Priority: 7, Cookie: 0x42, IdleTimeout: 1, Flags: of.FlagSendFlowRem,
		Match: of.Match{of.EthType(0x0800), of.Addr(of.FieldIPv4Dst, netip.MustParseAddr("10.9.9.9"))}}
	deleted := of.Flow{Table: 2, Priority: 8, Cookie: 0x43, Flags: of.FlagSendFlowRem, Match: of.Match{of.InPort(5)}}
	if err := c.BundleFlows(ctx, []of.FlowMod{of.AddFlow(idle), of.AddFlow(deleted)}, true); err != nil {
		t.Fatal(err)
	}
	if err := c.BundleFlows(ctx, []of.FlowMod{{Command: of.FlowDeleteStrict, Flow: deleted}}, true); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, c, of.EventFlowRemoved, 10*time.Second)
	fr := ev.FlowRemoved
	if fr.Reason != of.RemovedIdleTimeout || fr.Flow.Cookie != 0x42 || fr.Flow.Table != 2 || fr.Flow.Priority != 7 || fr.Flow.IdleTimeout != 1 {
		t.Errorf("flow removed = %+v, want the idle flow (cookie 0x42) removed for idle timeout", fr)
	}
	if diff := cmp.Diff(idle.Match.Normalize(), fr.Flow.Match, cmpOpts...); diff != "" {
		t.Errorf("removed flow's match (-installed +reported):\n%s", diff)
	}
}
