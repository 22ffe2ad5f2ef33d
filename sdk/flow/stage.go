package flow

import "fmt"

// Pipeline is a group of stages a packet class walks through. Pipelines are
// laid out in table-ID order: root first, then ARP, then IP.
type Pipeline uint8

const (
	// PipelineRoot holds the classifier every packet enters through (table 0).
	PipelineRoot Pipeline = iota
	// PipelineARP handles ARP after classification.
	PipelineARP
	// PipelineIP handles IPv4/IPv6 after classification.
	PipelineIP
	numPipelines
)

var pipelineNames = [...]string{"root", "arp", "ip"}

func (p Pipeline) String() string {
	if p < numPipelines {
		return pipelineNames[p]
	}
	return fmt.Sprintf("pipeline(%d)", uint8(p))
}

// Valid reports whether p is a known pipeline.
func (p Pipeline) Valid() bool { return p < numPipelines }

// ParsePipeline is the inverse of Pipeline.String.
func ParsePipeline(s string) (Pipeline, error) {
	for i, n := range pipelineNames {
		if n == s {
			return Pipeline(i), nil
		}
	}
	return 0, fmt.Errorf("unknown pipeline %q (want one of %v)", s, pipelineNames)
}

// Stage is a step of a pipeline. Stages are ordered: a packet only ever moves
// from a stage to the same or a later one, because OpenFlow goto_table only
// jumps forward.
type Stage uint8

const (
	StageClassifier Stage = iota
	StageValidation
	StageConntrackState
	StagePreRouting
	StageEgressSecurity
	StageRouting
	StagePostRouting
	StageSwitching
	StageIngressSecurity
	StageConntrack
	StageOutput
	numStages
)

var stageNames = [...]string{
	"Classifier", "Validation", "ConntrackState", "PreRouting", "EgressSecurity",
	"Routing", "PostRouting", "Switching", "IngressSecurity", "Conntrack", "Output",
}

func (s Stage) String() string {
	if s < numStages {
		return stageNames[s]
	}
	return fmt.Sprintf("stage(%d)", uint8(s))
}

// Valid reports whether s is a known stage.
func (s Stage) Valid() bool { return s < numStages }

// Stages lists every stage in order.
func Stages() []Stage {
	out := make([]Stage, numStages)
	for i := range out {
		out[i] = Stage(i)
	}
	return out
}

// ParseStage is the inverse of Stage.String.
func ParseStage(s string) (Stage, error) {
	for i, n := range stageNames {
		if n == s {
			return Stage(i), nil
		}
	}
	return 0, fmt.Errorf("unknown stage %q (want one of %v)", s, stageNames)
}
