package host

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/host/agent"
	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/flow/flowtest"
)

// vocabMatch gives a sample action the match its prerequisites need (the
// switch refuses, e.g., a move into tcp_dst on a flow that is not TCP).
func vocabMatch(name string) flow.Match {
	m := flow.Match{}
	switch {
	case name == "set_ipv6_dst":
		return m.IPv6()
	case name == "pop_vlan", name == "set_vlan_vid":
		return m.VlanVID(10)
	case name == "set_sctp_dst":
		return m.SCTP4()
	case name == "move_reg_to_header" || name == "learn":
		return m.TCP4()
	case strings.HasPrefix(name, "ct") && name != "ct_clear", name == "move_header_to_reg", name == "conjunction", name == "dec_ttl":
		return m.IPv4()
	}
	return m
}

// byCookie indexes dump-flows lines (ours or ovs-ofctl --no-stats's) by
// the tag in their cookie's low 32 bits.
func byCookie(lines []string) map[uint32]string {
	out := map[uint32]string{}
	for _, l := range lines {
		l = strings.TrimSpace(l)
		var c uint64
		if _, err := fmt.Sscanf(l, "cookie=0x%x,", &c); err == nil {
			out[uint32(c)] = l
		}
	}
	return out
}

// TestVocabularyOnLiveSwitch installs every action type and every match
// kind through the agent, one flow each, plus a select group with a hash
// selection method and a resubmit bucket and kbps/pktps meters with
// bursts; then compares ovs-ofctl dump-flows with the host's own text of
// each flow, whole lines, and reads every flow back with the plugin's
// read-back (Host.Flows: flow stats, decoded and reverse-translated) as
// the flow that was installed.
func TestVocabularyOnLiveSwitch(t *testing.T) {
	n := newNode(t)
	n.writeConfig()
	cfg, err := config.Load(n.cfgPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sw, db, err := agent.Connect(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	defer sw.Close()
	a, err := agent.New(cfg, sw, db, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if _, err := a.RegisterLocal(ctx, "local", &sdk.DescribeResponse{Name: "local", Fields: flowtest.Fields(), Resources: flowtest.Resources(), Tables: []sdk.Table{
		{Name: "v.class", Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier},
		{Name: "v.next", Pipeline: flow.PipelineIP, Stage: flow.StageRouting},
	}}); err != nil {
		t.Fatal(err)
	}
	b := flow.NewBatch().
		AddMeter(flow.Meter{ID: 1, Unit: flow.MeterPktps, Bands: []flow.MeterBand{{Rate: 1000, Burst: 100}}}).
		AddMeter(flow.Meter{ID: 2, Unit: flow.MeterKbps, Bands: []flow.MeterBand{{Rate: 20000, Burst: 4000}}}).
		AddGroup(flow.Group{ID: 1, Type: flow.GroupSelect, Selection: &flow.Selection{Method: flow.SelectHash, Fields: []flow.MatchKind{flow.MatchIPv4Src, flow.MatchTCPSrc}},
			Buckets: []flow.Bucket{{Weight: 10, Actions: []flow.Action{flow.LoadField(flowtest.Mark, 1), flow.Resubmit(flow.GotoTable("v.next"))}}, {Weight: 30, Actions: []flow.Action{flow.Output(11)}}}})
	items := map[uint32]string{}
	installed := map[uint32]flow.Flow{}
	tag := uint32(0)
	add := func(name string, f flow.Flow) {
		tag++
		f.Tag, f.Priority = tag, uint16(1000+tag)
		b.AddFlows(f)
		items[tag] = name
		installed[tag] = f
	}
	for _, s := range flowtest.Actions("v.next") {
		add("action "+s.Name, flow.Flow{Table: "v.class", Match: vocabMatch(s.Name), Actions: []flow.Action{s.Action}})
	}
	for _, s := range flowtest.Matches() {
		add("match "+s.Name, flow.Flow{Table: "v.class", Match: s.Match})
	}
	if err := a.Apply(ctx, "local", b, cfg.Limits); err != nil {
		t.Fatalf("the switch refused the vocabulary batch: %v", err)
	}

	ours := byCookie(a.Flows("local"))
	dump := n.sw.Ofctl(t, "--no-stats", "dump-flows", "br-int")
	ovs := byCookie(strings.Split(dump, "\n"))
	read, err := a.ReadFlows(ctx, "local", sdk.FlowFilter{})
	if err != nil {
		t.Fatalf("read back the vocabulary: %v", err)
	}
	back := map[uint32]flow.Flow{}
	for _, fs := range read {
		back[fs.Flow.Tag] = fs.Flow
	}
	for tg, name := range items {
		o, ok1 := ours[tg]
		s, ok2 := ovs[tg]
		if !ok1 || !ok2 {
			t.Errorf("%s: flow with tag %#x missing (ours %v, switch %v)", name, tg, ok1, ok2)
			continue
		}
		if o != s {
			t.Errorf("%s:\n ours   %s\n switch %s", name, o, s)
		}
		want := installed[tg]
		got, ok := back[tg]
		switch {
		case !ok:
			t.Errorf("%s: not read back", name)
		case got.String() != want.String() || got.Key() != want.Key():
			t.Errorf("%s: read back\n %s\ninstalled\n %s", name, got.String(), want.String())
		}
		t.Logf("%s: %s", name, s)
	}

	groups := n.sw.Ofctl(t, "dump-groups", "br-int")
	for _, want := range []string{"type=select,selection_method=hash,fields(ip_src,tcp_src)", "weight:10,actions=set_field:", ",resubmit(,", "weight:30,actions=output:11"} {
		if !strings.Contains(groups, want) {
			t.Errorf("dump-groups lacks %q:\n%s", want, groups)
		}
	}
	// ClientIP session affinity with real packets: a learn flow pins each
	// client (source address) to the backend register value, in a table
	// the plugin owns. Packets enter the switch through a packet-out that
	// runs the pipeline (OFPP_TABLE), as they would from a port.
	aff := flow.NewBatch().AddFlows(flow.Flow{Table: "v.class", Priority: 3000, Tag: 0xaff, Match: flow.Match{}.TCP4().TCPDst(80),
		Actions: []flow.Action{flow.Learn(flow.ActLearn{Table: "v.next", IdleTimeout: 60, HardTimeout: 600, Priority: 200, Specs: []flow.LearnSpec{
			flow.LearnMatchValue(flow.Header(flow.MatchEthType), 0x800),
			flow.LearnMatchValue(flow.Header(flow.MatchIPProto), 6),
			flow.LearnMatchPacket(flow.Header(flow.MatchIPv4Src)),
			flow.LearnMatchPacket(flow.Header(flow.MatchTCPDst)),
			flow.LearnLoadValue(5, flow.Reg(flowtest.Mark)),
		}})}})
	if err := a.Apply(ctx, "local", aff, cfg.Limits); err != nil {
		t.Fatalf("affinity flow: %v", err)
	}
	for _, client := range []string{"10.0.0.1", "10.0.0.2"} {
		pkt := tcpSYN(client, "10.96.0.10", 40000, 80)
		if err := sw.Send(ctx, &openflow.PacketOut{InPort: openflow.PortController, Actions: []openflow.Action{openflow.Output{Port: openflow.PortTable}}, Data: pkt}); err != nil {
			t.Fatalf("packet-out: %v", err)
		}
	}
	next := -1
	for _, ts := range a.Tables() {
		if ts.Table == "v.next" {
			next = int(ts.ID)
		}
	}
	err = testenv.Eventually("learned affinity flows", 10*time.Second, 100*time.Millisecond, func() error {
		d := n.sw.Ofctl(t, "--no-stats", "dump-flows", "br-int", fmt.Sprintf("table=%d", next))
		for _, client := range []string{"10.0.0.1", "10.0.0.2"} {
			want := "priority=200,tcp,nw_src=" + client + ",tp_dst=80 actions="
			if !strings.Contains(d, want) || !strings.Contains(d, "idle_timeout=60") || !strings.Contains(d, "hard_timeout=600") {
				return fmt.Errorf("no learned flow %q with the timeouts in:\n%s", want, d)
			}
		}
		if !strings.Contains(d, "0xa0/0x1fe0->reg0") && !strings.Contains(d, "load:0x5->NXM_NX_REG0[5..12]") {
			return fmt.Errorf("learned flows do not load the backend into mark (reg0[5..12]):\n%s", d)
		}
		t.Logf("learned:\n%s", d)
		return nil
	})
	if err != nil {
		t.Error(err)
	}

	// The learned flows belong to the plugin: they carry its prefix, the
	// learner's tag and the learned round, and read back as its flows.
	learnedFlows, err := a.ReadFlows(ctx, "local", sdk.FlowFilter{Table: "v.next", Tag: 0xaff, TagMask: ^uint32(0)})
	if err != nil || len(learnedFlows) != 2 {
		t.Errorf("read back learned flows: %d flows, %v; want the 2 learned", len(learnedFlows), err)
	}
	for _, fs := range learnedFlows {
		t.Logf("learned, read back: %s", fs.Flow.String())
	}

	// The agent restarts (a new agent on the same state directory; the
	// switch keeps its flows), the plugin re-submits its affinity flow and
	// says Synced: the earlier agent's rounds are swept by cookie, and the
	// learned flows survive it.
	a2, err := agent.New(cfg, sw, db, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a2.RegisterLocal(ctx, "local", &sdk.DescribeResponse{Name: "local", Fields: flowtest.Fields(), Tables: []sdk.Table{
		{Name: "v.class", Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier},
		{Name: "v.next", Pipeline: flow.PipelineIP, Stage: flow.StageRouting},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := a2.Apply(ctx, "local", aff, cfg.Limits); err != nil {
		t.Fatalf("affinity flow after the agent restart: %v", err)
	}
	if _, err := a2.Synced(ctx, "local"); err != nil {
		t.Fatal(err)
	}
	d := n.sw.Ofctl(t, "--no-stats", "dump-flows", "br-int", fmt.Sprintf("table=%d", next))
	for _, client := range []string{"10.0.0.1", "10.0.0.2"} {
		if want := "priority=200,tcp,nw_src=" + client + ",tp_dst=80 actions="; !strings.Contains(d, want) {
			t.Errorf("learned flow %q did not survive the sweep after an agent restart:\n%s", want, d)
		}
	}
	if all := n.sw.Ofctl(t, "--no-stats", "dump-flows", "br-int"); strings.Contains(all, fmt.Sprintf("priority=%d,", 1001)) {
		t.Errorf("the sweep after the agent restart left the earlier round's vocabulary flows:\n%s", all)
	}

	meters := n.sw.Ofctl(t, "dump-meters", "br-int")
	for _, want := range []string{"pktps burst", "type=drop rate=1000 burst_size=100", "kbps burst", "type=drop rate=20000 burst_size=4000"} {
		if !strings.Contains(meters, want) {
			t.Errorf("dump-meters lacks %q:\n%s", want, meters)
		}
	}
}

// tcpSYN builds an Ethernet/IPv4/TCP SYN (checksums left zero: the switch
// does not check them on this path).
func tcpSYN(src, dst string, sport, dport uint16) []byte {
	b := make([]byte, 14+20+20)
	copy(b[0:6], []byte{0x02, 0, 0, 0, 0, 0x02})
	copy(b[6:12], []byte{0x02, 0, 0, 0, 0, 0x01})
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(ip[2:], 40)
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	tcp[12], tcp[13] = 5<<4, 0x02
	binary.BigEndian.PutUint16(tcp[14:], 65535)
	return b
}
