package yardctl

import (
	"context"
	"fmt"
	"html"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"switchyard.dev/switchyard/host/agent"
)

// PipelineTable is one table of `yardctl pipeline`, with the tables its
// flows can send a packet to next.
type PipelineTable struct {
	agent.TableStatus
	// Next are the table IDs this table's flows jump or resubmit to.
	Next []uint8 `json:"next,omitempty"`
}

// Pipeline is the live layout: stages in pipeline order, each with its
// tables.
type Pipeline struct {
	Tables []PipelineTable `json:"tables"`
}

func pipelineCmd(o *options) *cobra.Command {
	var svgPath string
	cmd := &cobra.Command{
		Use:   "pipeline [--svg FILE]",
		Short: "Draw the live OpenFlow pipeline: stages, tables, the plugin owning each, and the jumps between them",
		Example: `  yardctl pipeline
  yardctl pipeline --svg pipeline.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
			defer cancel()
			p, err := loadPipeline(ctx, o.client())
			if err != nil {
				return err
			}
			if svgPath != "" {
				f, err := os.Create(svgPath)
				if err != nil {
					return &ExitError{ExitUsage, fmt.Errorf("--svg: %v", err)}
				}
				if err := writeSVG(f, p); err != nil {
					f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
			}
			return o.print(cmd.OutOrStdout(), p, func(tw *tabwriter.Writer) { pipelineText(tw, p) })
		},
	}
	cmd.Flags().StringVar(&svgPath, "svg", "", "also write the picture as SVG to this file")
	return cmd
}

// jumpRE finds the tables a flow's actions continue in: goto_table:N,
// resubmit(PORT,N) and ct(...,table=N,...).
var jumpRE = regexp.MustCompile(`goto_table:(\d+)|resubmit\([^,()]*,(\d+)|ct\([^ ]*?table=(\d+)`)

// jumps returns the table IDs a flow in the switch's text sends to.
func jumps(flow string) []uint8 {
	_, actions, ok := strings.Cut(flow, "actions=")
	if !ok {
		return nil
	}
	var out []uint8
	for _, m := range jumpRE.FindAllStringSubmatch(actions, -1) {
		for _, g := range m[1:] {
			if g == "" {
				continue
			}
			if n, err := strconv.Atoi(g); err == nil && n < 255 {
				out = append(out, uint8(n))
			}
		}
	}
	return out
}

// flowTable is the table of a flow in the switch's text (no table= is 0).
func flowTable(flow string) uint8 {
	i := strings.Index(flow, " table=")
	if i < 0 {
		return 0
	}
	s := flow[i+len(" table="):]
	if j := strings.IndexByte(s, ','); j >= 0 {
		s = s[:j]
	}
	n, _ := strconv.Atoi(s)
	return uint8(n)
}

func loadPipeline(ctx context.Context, c *client) (*Pipeline, error) {
	var ts []agent.TableStatus
	if err := c.get(ctx, "/v1/tables", &ts); err != nil {
		return nil, err
	}
	next := map[uint8]map[uint8]bool{}
	owners := map[string]bool{}
	for _, t := range ts {
		owners[t.Owner] = true
	}
	for owner := range owners {
		var fs []string
		if err := c.get(ctx, "/v1/flows?plugin="+owner, &fs); err != nil {
			return nil, err
		}
		for _, f := range fs {
			from := flowTable(f)
			for _, to := range jumps(f) {
				if next[from] == nil {
					next[from] = map[uint8]bool{}
				}
				next[from][to] = true
			}
		}
	}
	p := &Pipeline{Tables: []PipelineTable{}}
	for _, t := range ts {
		pt := PipelineTable{TableStatus: t}
		for to := range next[t.ID] {
			pt.Next = append(pt.Next, to)
		}
		slices.Sort(pt.Next)
		p.Tables = append(p.Tables, pt)
	}
	slices.SortStableFunc(p.Tables, func(a, b PipelineTable) int { return int(a.ID) - int(b.ID) })
	return p, nil
}

func (p *Pipeline) name(id uint8) string {
	for _, t := range p.Tables {
		if t.ID == id {
			return t.Table
		}
	}
	return strconv.Itoa(int(id))
}

// pipelineText draws the stages top to bottom, each table with its owner
// and where its flows go next.
func pipelineText(tw *tabwriter.Writer, p *Pipeline) {
	stage := ""
	for _, t := range p.Tables {
		if s := t.Pipeline + "/" + t.Stage; s != stage {
			if stage != "" {
				fmt.Fprintln(tw, "\t│")
			}
			stage = s
			fmt.Fprintf(tw, "[%s]\n", s)
		}
		var next []string
		for _, n := range t.Next {
			next = append(next, p.name(n))
		}
		fmt.Fprintf(tw, "%3d\t├─ %s\t%s\t%d flows\t→ %s\n", t.ID, t.Table, t.Owner, t.Flows, dash(strings.Join(next, ", ")))
	}
}

// writeSVG draws one row per table, grouped in stage bands, with an arrow
// on the right for every jump between tables.
func writeSVG(w io.Writer, p *Pipeline) error {
	const rowH, top, left, boxW = 26, 20, 170, 300
	colors := []string{"#dbeafe", "#dcfce7", "#fef9c3", "#fce7f3", "#ede9fe", "#ffedd5", "#e0f2fe", "#f1f5f9"}
	ownerColor := map[string]string{}
	row := map[uint8]int{}
	for i, t := range p.Tables {
		row[t.ID] = i
		if _, ok := ownerColor[t.Owner]; !ok {
			ownerColor[t.Owner] = colors[len(ownerColor)%len(colors)]
		}
	}
	height := top*2 + rowH*len(p.Tables)
	width := left + boxW + 40 + 12*len(p.Tables)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="monospace" font-size="12">`+"\n", width, height)
	b.WriteString(`<defs><marker id="a" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" fill="#555"/></marker></defs>` + "\n")
	stage := ""
	for i, t := range p.Tables {
		y := top + i*rowH
		if s := t.Pipeline + "/" + t.Stage; s != stage {
			stage = s
			fmt.Fprintf(&b, `<text x="4" y="%d" font-weight="bold">%s</text>`+"\n", y+17, html.EscapeString(s))
			fmt.Fprintf(&b, `<line x1="0" y1="%d" x2="%d" y2="%d" stroke="#bbb"/>`+"\n", y, width, y)
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="%s" stroke="#888"/>`+"\n", left, y+2, boxW, rowH-4, ownerColor[t.Owner])
		fmt.Fprintf(&b, `<text x="%d" y="%d">%d %s (%s, %d flows)</text>`+"\n", left+6, y+17, t.ID, html.EscapeString(t.Table), html.EscapeString(t.Owner), t.Flows)
	}
	for i, t := range p.Tables {
		for k, n := range t.Next {
			j, ok := row[n]
			if !ok || j == i {
				continue
			}
			x := left + boxW + 10 + 12*((i+k)%max(1, len(p.Tables)))
			y1, y2 := top+i*rowH+rowH/2, top+j*rowH+rowH/2
			fmt.Fprintf(&b, `<path d="M%d,%d H%d V%d H%d" fill="none" stroke="#555" marker-end="url(#a)"/>`+"\n", left+boxW, y1, x, y2, left+boxW)
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
