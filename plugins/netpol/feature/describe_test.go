package feature

import (
	"context"
	"testing"

	"switchyard.dev/switchyard/plugins/netpol/flows"
	"switchyard.dev/switchyard/sdk"
)

func TestDescribeFlow(t *testing.T) {
	p := &Netpol{rules: map[uint32]*flows.Rule{
		7: {Tag: 7, Policy: "x/deny-db", Name: "no-db", Direction: flows.Ingress, Action: "Drop"},
		8: {Tag: 8, Policy: "web", Direction: flows.Egress, Action: "Allow"},
	}}
	for _, tc := range []struct {
		name string
		req  sdk.DescribeFlowRequest
		want string
	}{
		{"named rule", sdk.DescribeFlowRequest{Table: flows.IngressRules, Priority: 200, Tag: 7}, "policy x/deny-db, ingress rule no-db: Drop"},
		{"unnamed rule", sdk.DescribeFlowRequest{Table: flows.EgressRules, Priority: 200, Tag: 8}, "policy web, egress rule (unnamed): Allow"},
		{"isolation drop", sdk.DescribeFlowRequest{Table: flows.IngressIsolation, Priority: 100}, "the destination pod is isolated for ingress by a policy, and no rule allowed this traffic"},
		{"pass-through", sdk.DescribeFlowRequest{Table: flows.EgressIsolation, Priority: 0}, ""},
		{"unknown tag", sdk.DescribeFlowRequest{Table: flows.IngressRules, Priority: 200, Tag: 99}, ""},
	} {
		var resp sdk.DescribeFlowResponse
		if err := p.DescribeFlow(context.Background(), tc.req, &resp); err != nil || resp.Description != tc.want {
			t.Errorf("%s: %q (%v), want %q", tc.name, resp.Description, err, tc.want)
		}
	}
}
