package flow

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMatchText(t *testing.T) {
	mac := net.HardwareAddr{0xaa, 0, 0, 0, 0, 1}
	f := Field{Name: "mark", Width: 8}
	cases := []struct {
		name string
		m    Match
		want string
	}{
		{"empty", Match{}, ""},
		{"order is canonical, not call order", Match{}.IPv4Dst(netip.MustParseAddr("10.0.0.2")).InPort(3).IPv4(), "ip,in_port=3,nw_dst=10.0.0.2"},
		{"tcp shorthand hides eth_type and proto", Match{}.TCP().TCPDst(80), "tcp,tcp_dst=80"},
		{"masked port", Match{}.UDP().UDPDstMasked(0x400, 0xfc00), "udp,udp_dst=0x400/0xfc00"},
		{"prefix", Match{}.IPv4().IPv4SrcPrefix(netip.MustParsePrefix("10.1.2.3/16")), "ip,nw_src=10.1.0.0/16"},
		{"full-length prefix is exact", Match{}.IPv4().IPv4SrcPrefix(netip.MustParsePrefix("10.1.2.3/32")), "ip,nw_src=10.1.2.3"},
		{"mac and masked mac", Match{}.EthSrc(mac).EthDstMasked(mac, net.HardwareAddr{1, 0, 0, 0, 0, 0}), "dl_src=aa:00:00:00:00:01,dl_dst=00:00:00:00:00:00/01:00:00:00:00:00"},
		{"ct_state", Match{}.CTState(CTTracked|CTEstablished, CTTracked|CTEstablished|CTNew), "ct_state=-new+est+trk"},
		{"register field by name", Match{}.Field(f, 5).FieldMasked(FieldPacketSource, 1, 3), "reg:mark=0x5,reg:sdk.pkt_source=0x1/0x3"},
		{"arp", Match{}.ARP().ARPTpa(netip.MustParseAddr("10.0.0.1")), "arp,arp_tpa=10.0.0.1"},
		{"same kind twice keeps the last", Match{}.InPort(1).InPort(2), "in_port=2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.m.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchIsImmutable(t *testing.T) {
	base := Match{}.IPv4()
	a := base.InPort(1)
	b := base.InPort(2)
	if base.String() != "ip" || a.String() != "ip,in_port=1" || b.String() != "ip,in_port=2" {
		t.Errorf("shared prefix changed: base %q a %q b %q", base, a, b)
	}
}

func TestFlowText(t *testing.T) {
	f := Flow{Table: "podnet.class", Priority: 100, Match: Match{}.InPort(3).IPv4(),
		Actions: []Action{LoadField(FieldPacketSource, PacketSourceLocal), Conntrack(CT{Commit: true, Zone: 2, Resume: GotoStage(StageConntrack)})},
		Goto:    NextTable()}
	want := "table=podnet.class, priority=100, ip,in_port=3 actions=load:0x1->reg:sdk.pkt_source,ct(commit,zone=2,table=@stage:Conntrack),goto_table:@next"
	if diff := cmp.Diff(want, f.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	clause := Flow{Table: "np", Priority: 200, Match: Match{}.IPv4().IPv4Src(netip.MustParseAddr("10.0.0.1")), Actions: []Action{Conjunction(9, 1, 2)}}
	if got, want := clause.String(), "table=np, priority=200, ip,nw_src=10.0.0.1 actions=conjunction(9,1/2)"; got != want {
		t.Errorf("conjunction clause text %q, want %q", got, want)
	}
	if got, want := (Match{}.ConjID(9)).String(), "conj_id=9"; got != want {
		t.Errorf("conj_id match text %q, want %q", got, want)
	}
	drop := Flow{Table: "t", Priority: 1}
	if got := drop.String(); got != "table=t, priority=1 actions=drop" {
		t.Errorf("drop flow text %q", got)
	}
	g := Group{ID: 1, Type: GroupSelect, Buckets: []Bucket{{Weight: 1, Actions: []Action{Output(1)}}, {Weight: 2, Actions: []Action{Output(2)}}}}
	if got := g.String(); got != "group_id=1,type=select,bucket=weight:1,actions=output:1,bucket=weight:2,actions=output:2" {
		t.Errorf("group text %q", got)
	}
	m := Meter{ID: 3, Unit: MeterPktps, Bands: []MeterBand{{Rate: 10, Burst: 2}}}
	if got := m.String(); got != "meter=3,pktps,bands=type=drop rate=10 burst_size=2" {
		t.Errorf("meter text %q", got)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		b    *Batch
		want string // "" = valid
	}{
		{"valid", NewBatch().AddFlows(Flow{Table: "t", Match: Match{}.InPort(1)}), ""},
		{"no table", NewBatch().AddFlows(Flow{}), "flow has no table"},
		{"value too wide for field", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{LoadField(Field{Name: "f", Width: 2}, 4)}}), `value 0x4 does not fit field "f" of 2 bits`},
		{"field width out of range", NewBatch().AddFlows(Flow{Table: "t", Match: Match{}.Field(Field{Name: "f", Width: 33}, 1)}), "width 33 out of range"},
		{"move widths differ", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{MoveField(Field{Name: "a", Width: 2}, Field{Name: "b", Width: 3})}}), "widths differ"},
		{"bad push_vlan", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{PushVLAN(0x1234)}}), "TPID 0x1234"},
		{"group id 0", NewBatch().AddGroup(Group{}), "group id 0 out of range"},
		{"ct in bucket", NewBatch().AddGroup(Group{ID: 1, Buckets: []Bucket{{Actions: []Action{Conntrack(CT{})}}}}), "not allowed in a bucket"},
		{"meter without band", NewBatch().AddMeter(Meter{ID: 1}), "needs at least one band"},
		{"op with two objects", &Batch{Ops: []Op{{Kind: OpAdd, Flow: &Flow{Table: "t"}, Group: &Group{ID: 1}}}}, "exactly one of flow, group, meter"},
		{"conjunction clause", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{Conjunction(7, 1, 3), Conjunction(8, 2, 2)}}), ""},
		{"conjunction clause beyond count", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{Conjunction(7, 4, 3)}}), "1 <= clause <= clauses"},
		{"conjunction of one clause", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{Conjunction(7, 1, 1)}}), "2 <= clauses <= 64"},
		{"conjunction with other actions", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{Conjunction(7, 1, 2), Output(1)}}), "no other actions and no jump"},
		{"conjunction with a jump", NewBatch().AddFlows(Flow{Table: "t", Actions: []Action{Conjunction(7, 1, 2)}, Goto: NextTable()}), "no other actions and no jump"},
		{"delete needs only the key", NewBatch().DeleteFlows(Flow{Table: "t", Actions: []Action{{Kind: 99}}}), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseStagePipeline(t *testing.T) {
	for _, s := range Stages() {
		got, err := ParseStage(s.String())
		if err != nil || got != s {
			t.Errorf("ParseStage(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseStage("Nope"); err == nil || !strings.Contains(err.Error(), "Classifier") {
		t.Errorf("bad stage error %v should list the stages", err)
	}
	if p, err := ParsePipeline("arp"); err != nil || p != PipelineARP {
		t.Errorf("ParsePipeline(arp) = %v, %v", p, err)
	}
}
