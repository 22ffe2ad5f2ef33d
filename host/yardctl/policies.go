package yardctl

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// PolicyRule is one rule netpol realized on this node, with what it
// decided since its flows were installed.
type PolicyRule struct {
	Policy    string  `json:"policy"`
	Direction string  `json:"direction"`
	Rule      string  `json:"rule"`
	Action    string  `json:"action"`
	Packets   float64 `json:"packets"`
	Bytes     float64 `json:"bytes"`
}

// Policies is `yardctl get policies`: the node's span as netpol realized it.
type Policies struct {
	// Policies, Rules and Flows are netpol's gauges: the policies in the
	// span the controller streamed here, the rules with flows, the flows.
	Policies int          `json:"policies"`
	Rules    int          `json:"rules"`
	Flows    int          `json:"flows"`
	Epoch    int          `json:"epoch"`
	Realized []PolicyRule `json:"realized"`
}

// getPolicies reads netpol's metrics from the agent: no other path shows
// the span this node got, and the counters say the rules are live.
func getPolicies(ctx context.Context, c *client, policy string) (*Policies, error) {
	b, code, err := c.do(ctx, "GET", "/metrics", nil)
	if err != nil {
		return nil, err
	}
	if code/100 != 2 {
		return nil, fmt.Errorf("GET /metrics: HTTP %d: %s", code, strings.TrimSpace(string(b)))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		return nil, fmt.Errorf("the agent's /metrics does not parse: %v", err)
	}
	if _, ok := fams["switchyard_netpol_policies"]; !ok {
		return nil, &ExitError{ExitFailure, fmt.Errorf("no netpol plugin reports on this node: is netpol enabled in the agent config (yardctl get plugins)?")}
	}
	gauge := func(name string) int {
		if f, ok := fams[name]; ok && len(f.Metric) > 0 {
			return int(f.Metric[0].GetGauge().GetValue())
		}
		return 0
	}
	out := &Policies{Policies: gauge("switchyard_netpol_policies"), Rules: gauge("switchyard_netpol_rules"),
		Flows: gauge("switchyard_netpol_flows"), Epoch: gauge("switchyard_netpol_epoch"), Realized: []PolicyRule{}}
	rows := map[string]*PolicyRule{}
	for _, name := range []string{"switchyard_netpol_rule_packets_total", "switchyard_netpol_rule_bytes_total"} {
		f, ok := fams[name]
		if !ok {
			continue
		}
		for _, m := range f.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			if policy != "" && l["policy"] != policy {
				continue
			}
			k := l["policy"] + "\x00" + l["direction"] + "\x00" + l["rule"]
			r := rows[k]
			if r == nil {
				r = &PolicyRule{Policy: l["policy"], Direction: l["direction"], Rule: l["rule"], Action: l["action"]}
				rows[k] = r
			}
			if strings.HasSuffix(name, "packets_total") {
				r.Packets = m.GetCounter().GetValue()
			} else {
				r.Bytes = m.GetCounter().GetValue()
			}
		}
	}
	for _, r := range rows {
		out.Realized = append(out.Realized, *r)
	}
	slices.SortFunc(out.Realized, func(a, b PolicyRule) int {
		return strings.Compare(a.Policy+"\x00"+a.Direction+"\x00"+a.Rule, b.Policy+"\x00"+b.Direction+"\x00"+b.Rule)
	})
	return out, nil
}

func policiesTable(tw *tabwriter.Writer, p *Policies) {
	fmt.Fprintf(tw, "span: %d policies, %d rules with flows, %d flows, epoch %d\n\n", p.Policies, p.Rules, p.Flows, p.Epoch)
	fmt.Fprintln(tw, "POLICY\tDIRECTION\tRULE\tACTION\tPACKETS\tBYTES")
	for _, r := range p.Realized {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%.0f\n", r.Policy, dash(r.Direction), dash(r.Rule), dash(r.Action), r.Packets, r.Bytes)
	}
}
