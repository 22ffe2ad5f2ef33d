package ofxlate

import (
	"net"
	"net/netip"
	"testing"

	"switchyard.dev/switchyard/host/pipeline"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// BenchmarkReverseFlow is the cost of reading one typical flow back into
// a plugin's terms (Host.Flows does this per flow on the switch), against
// BenchmarkForwardFlow, the translation the other way, in the same run.
func BenchmarkReverseFlow(b *testing.B) {
	rev, r := benchFlow(b)
	of, err := Flow(r)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rev.FromFlow(&of); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkForwardFlow(b *testing.B) {
	_, r := benchFlow(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Flow(r); err != nil {
			b.Fatal(err)
		}
	}
}

func benchFlow(b *testing.B) (*Reverse, *pipeline.Resolved) {
	a := pipeline.New()
	mark := flow.Field{Name: "mark", Width: 8}
	if _, err := a.Register("p", []sdk.Table{
		{Name: "class", Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier},
		{Name: "route", Pipeline: flow.PipelineIP, Stage: flow.StageRouting},
	}, []flow.Field{mark}); err != nil {
		b.Fatal(err)
	}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	f := flow.Flow{Table: "class", Priority: 100, Tag: 7,
		Match:   flow.Match{}.InPort(3).EthSrc(mac).IPv4().IPv4Src(netip.MustParseAddr("10.0.0.2")).Field(mark, 1),
		Actions: []flow.Action{flow.LoadField(flow.FieldPacketSource, 1), flow.SetEthDst(mac)}, Goto: flow.GotoTable("route")}
	r, err := a.Resolve("p", &f)
	if err != nil {
		b.Fatal(err)
	}
	p, _ := a.Plugin("p")
	fields := flow.WellKnownBits()
	for n, bb := range p.Bits {
		fields[n] = bb
	}
	names := map[uint8]string{}
	for _, t := range a.Layout() {
		names[t.ID] = t.Name
	}
	return &Reverse{Owner: "p", Prefix: p.Prefix, Fields: fields, Table: func(id uint8) (string, bool) { n, ok := names[id]; return n, ok }}, r
}
