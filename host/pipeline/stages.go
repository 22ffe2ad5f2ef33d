package pipeline

import "switchyard.dev/switchyard/sdk/flow"

// The br-int pipeline. Every packet enters table 0 (root/Classifier), which
// hands it to the ARP or IP pipeline. Inside a pipeline the stages run top
// to bottom; each stage is a range of table IDs, and a plugin's table gets an
// ID inside its stage's range, so OpenFlow's forward-only goto_table always
// moves a packet to the same or a later stage.
//
//	            table IDs   stage                 typical owner
//	root   ┌─   0 -   7    Classifier            podnet (in_port → pkt_source)
//	       └──────┬─────────────────────────────
//	      ┌───────┴───────┐
//	      ▼ ARP            ▼ IP
//	arp  ┌   10 -  19   Validation      ip ┌   30 -  39   Validation        spoof guard
//	     └   20 -  29   Output             │   40 -  49   ConntrackState    ct() lookup
//	                                       │   50 -  69   PreRouting        service DNAT
//	                                       │   70 -  89   EgressSecurity    netpol egress
//	                                       │   90 - 109   Routing           L3 forwarding, tunnel
//	                                       │  110 - 129   PostRouting       SNAT, egress
//	                                       │  130 - 149   Switching         L2 forwarding
//	                                       │  150 - 179   IngressSecurity   netpol ingress
//	                                       │  180 - 199   Conntrack         ct(commit)
//	                                       └  200 - 219   Output            output:reg
//	            220 - 253   free for future stages; 254 reserved
//
// How to add a stage or a pipeline:
//  1. Add the stage to flow.Stage (sdk/flow/stage.go) in its pipeline order.
//  2. Add its Range below, inside the free IDs (220-253) or by splitting a
//     generous range, keeping ranges sorted by First and non-overlapping.
//     Never move an existing range: nodes persist table IDs across restarts,
//     and flows installed by older plugins would land in the wrong stage.
//  3. Update the diagram above and run `go test ./host/pipeline/`
//     (TestRangesWellFormed checks order and overlap).
//
// How to add a table: you don't, here. A plugin declares it (sdk.Table with
// name, pipeline and stage) and the Arbiter assigns it the lowest free ID in
// that stage's range at load time.

// Range is the table IDs [First, Last] of one stage of one pipeline.
type Range struct {
	Pipeline flow.Pipeline
	Stage    flow.Stage
	First    uint8
	Last     uint8
}

// Size is the number of table IDs in the range.
func (r Range) Size() int { return int(r.Last) - int(r.First) + 1 }

// Ranges is the layout, sorted by First.
var Ranges = []Range{
	{flow.PipelineRoot, flow.StageClassifier, 0, 7},
	{flow.PipelineARP, flow.StageValidation, 10, 19},
	{flow.PipelineARP, flow.StageOutput, 20, 29},
	{flow.PipelineIP, flow.StageValidation, 30, 39},
	{flow.PipelineIP, flow.StageConntrackState, 40, 49},
	{flow.PipelineIP, flow.StagePreRouting, 50, 69},
	{flow.PipelineIP, flow.StageEgressSecurity, 70, 89},
	{flow.PipelineIP, flow.StageRouting, 90, 109},
	{flow.PipelineIP, flow.StagePostRouting, 110, 129},
	{flow.PipelineIP, flow.StageSwitching, 130, 149},
	{flow.PipelineIP, flow.StageIngressSecurity, 150, 179},
	{flow.PipelineIP, flow.StageConntrack, 180, 199},
	{flow.PipelineIP, flow.StageOutput, 200, 219},
}

// rangeOf finds the range of a pipeline's stage.
func rangeOf(p flow.Pipeline, s flow.Stage) (Range, bool) {
	for _, r := range Ranges {
		if r.Pipeline == p && r.Stage == s {
			return r, true
		}
	}
	return Range{}, false
}

// stagesOf lists the stages a pipeline has, in order.
func stagesOf(p flow.Pipeline) []flow.Stage {
	var out []flow.Stage
	for _, r := range Ranges {
		if r.Pipeline == p {
			out = append(out, r.Stage)
		}
	}
	return out
}
