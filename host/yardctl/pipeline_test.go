package yardctl

import (
	"bytes"
	"encoding/xml"
	"io"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"

	"switchyard.dev/switchyard/host/agent"
)

func TestJumps(t *testing.T) {
	for _, tc := range []struct {
		flow  string
		table uint8
		next  []uint8
	}{
		{"cookie=0x1, priority=0 actions=goto_table:200", 0, []uint8{200}},
		{"cookie=0x1, table=150, priority=100,tcp,tp_dst=9 actions=drop", 150, nil},
		{"cookie=0x1, table=31, priority=200,ip actions=load:0x7->NXM_NX_REG3[],resubmit(,33),goto_table:34", 31, []uint8{33, 34}},
		{"cookie=0x1, table=40, priority=200,ip actions=ct(commit,zone=3,table=41,nat(dst=10.0.0.1:80))", 40, []uint8{41}},
		{"cookie=0x1, table=5, priority=1,in_port=2 actions=resubmit(3,7)", 5, []uint8{7}},
		// a table= inside the match is not a jump
		{"cookie=0x1, table=9, priority=1 actions=output:3", 9, nil},
	} {
		if got := flowTable(tc.flow); got != tc.table {
			t.Errorf("flowTable(%q) = %d, want %d", tc.flow, got, tc.table)
		}
		if got := jumps(tc.flow); !slices.Equal(got, tc.next) {
			t.Errorf("jumps(%q) = %v, want %v", tc.flow, got, tc.next)
		}
	}
}

func TestPipelineSVGIsWellFormed(t *testing.T) {
	p := &Pipeline{Tables: []PipelineTable{
		{TableStatus: agent.TableStatus{ID: 0, Table: "podnet.classifier", Pipeline: "ip", Stage: "Classifier", Owner: "podnet", Flows: 3}, Next: []uint8{10}},
		{TableStatus: agent.TableStatus{ID: 10, Table: "a<b>&c", Pipeline: "ip", Stage: "Routing", Owner: "x&y"}, Next: []uint8{0, 99}},
	}}
	var b bytes.Buffer
	if err := writeSVG(&b, p); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(&b)
	paths := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse as XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "path" {
			paths++
		}
	}
	// the marker's triangle, and the two jumps between drawn tables (99 is
	// not drawn)
	if paths != 3 {
		t.Errorf("%d paths, want 3", paths)
	}
	var txt bytes.Buffer
	tw := tabwriter.NewWriter(&txt, 0, 4, 2, ' ', 0)
	pipelineText(tw, p)
	tw.Flush()
	if !strings.Contains(txt.String(), "podnet.classifier") || !strings.Contains(txt.String(), "→ a<b>&c") {
		t.Errorf("text drawing:\n%s", txt.String())
	}
}
