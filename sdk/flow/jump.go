package flow

import "fmt"

// JumpKind says how a jump names its target.
type JumpKind uint8

const (
	JumpNone    JumpKind = iota // no goto_table: the action list ends processing
	JumpNext                    // the next table of the same pipeline, whoever owns it
	JumpStage                   // the first table at or after a stage (of the flow's pipeline)
	JumpStageIn                 // the first table at or after a stage of another pipeline
	JumpTable                   // a table by name: the plugin's own, or an exported one
	numJumpKinds
)

// Jump is a symbolic goto_table target. The host resolves it to a table ID
// and refuses it if it would go backward (OpenFlow only jumps forward).
type Jump struct {
	Kind     JumpKind
	Stage    Stage    // JumpStage, JumpStageIn
	Pipeline Pipeline // JumpStageIn
	Table    string   // JumpTable
}

// NextTable jumps to the table right after the flow's table in its pipeline.
func NextTable() Jump { return Jump{Kind: JumpNext} }

// GotoStage jumps to the first table at or after stage s in the flow's pipeline.
func GotoStage(s Stage) Jump { return Jump{Kind: JumpStage, Stage: s} }

// GotoPipeline jumps to the first table at or after stage s of pipeline p;
// the root classifier uses it to hand packets to the ARP or IP pipeline.
func GotoPipeline(p Pipeline, s Stage) Jump { return Jump{Kind: JumpStageIn, Pipeline: p, Stage: s} }

// GotoTable jumps to a named table.
func GotoTable(name string) Jump { return Jump{Kind: JumpTable, Table: name} }

// Validate checks the jump's own shape.
func (j Jump) Validate() error {
	switch j.Kind {
	case JumpNone, JumpNext:
	case JumpStage:
		if !j.Stage.Valid() {
			return fmt.Errorf("goto stage: unknown stage %d", j.Stage)
		}
	case JumpStageIn:
		if !j.Stage.Valid() || !j.Pipeline.Valid() {
			return fmt.Errorf("goto pipeline stage: unknown pipeline %d or stage %d", j.Pipeline, j.Stage)
		}
	case JumpTable:
		if j.Table == "" {
			return fmt.Errorf("goto table: empty table name")
		}
	default:
		return fmt.Errorf("unknown jump kind %d", j.Kind)
	}
	return nil
}

func (j Jump) String() string {
	switch j.Kind {
	case JumpNone:
		return ""
	case JumpNext:
		return "@next"
	case JumpStage:
		return "@stage:" + j.Stage.String()
	case JumpStageIn:
		return "@stage:" + j.Pipeline.String() + "/" + j.Stage.String()
	case JumpTable:
		return "@" + j.Table
	}
	return fmt.Sprintf("@jump(%d)", j.Kind)
}
