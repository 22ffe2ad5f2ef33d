package feature

import (
	"context"
	"fmt"

	"switchyard.dev/switchyard/plugins/netpol/flows"
	"switchyard.dev/switchyard/sdk"
)

var _ sdk.FlowDescriber = (*Netpol)(nil)

// DescribeFlow names the policy and rule behind one of netpol's flows, so
// a trace (yardctl trace) that a netpol flow decided says which policy
// allowed or dropped the packet. Rule flows carry the rule's tag; the
// isolation tables' flows carry none and mean "isolated, no rule allowed".
func (p *Netpol) DescribeFlow(_ context.Context, req sdk.DescribeFlowRequest, resp *sdk.DescribeFlowResponse) error {
	if r := p.Rules()[req.Tag]; req.Tag != 0 && r != nil {
		name := r.Name
		if name == "" {
			name = "(unnamed)"
		}
		resp.Description = fmt.Sprintf("policy %s, %s rule %s: %s", r.Policy, r.Direction, name, r.Action)
		return nil
	}
	if req.Priority == 0 {
		return nil // a table's pass-through (miss) flow
	}
	switch req.Table {
	case flows.IngressIsolation:
		resp.Description = "the destination pod is isolated for ingress by a policy, and no rule allowed this traffic"
	case flows.EgressIsolation:
		resp.Description = "the source pod is isolated for egress by a policy, and no rule allowed this traffic"
	}
	return nil
}
