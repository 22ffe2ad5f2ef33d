package sdktest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/sdktest"
)

type guard struct{}

func (guard) Describe(_ context.Context, req sdk.DescribeRequest, r *sdk.DescribeResponse) error {
	r.Name = "guard"
	r.Tables = []sdk.Table{{Name: "guard.in", Pipeline: flow.PipelineIP, Stage: flow.StageIngressSecurity, Miss: sdk.MissNext}}
	if string(req.Config) == `{"audit":true}` {
		r.Tables = append(r.Tables, sdk.Table{Name: "guard.audit", Pipeline: flow.PipelineIP, Stage: flow.StagePostRouting, Miss: sdk.MissNext})
	}
	return nil
}

func (guard) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	b := flow.NewBatch().AddFlows(flow.Flow{Table: "guard.in", Priority: 10, Match: flow.Match{}.TCP4().TCPDst(23)})
	if err := req.Host.Apply(ctx, b); err != nil {
		return err
	}
	if _, err := req.Host.Port(ctx, "missing"); !errors.Is(err, sdk.ErrNotFound) {
		return errors.New("a missing port must be ErrNotFound")
	}
	return req.Host.Synced(ctx)
}

func TestStart(t *testing.T) {
	p := sdktest.Start(t, guard{}, sdktest.Options{Config: []byte(`{"audit":true}`)})
	if diff := cmp.Diff([]string{"table=guard.in, priority=10, tcp,tp_dst=23 actions=drop"}, p.Host.FlowTexts("guard.in")); diff != "" {
		t.Errorf("flows (-want +got):\n%s", diff)
	}
	if p.Host.SyncedCalls() != 1 || p.Host.Batches() != 1 {
		t.Errorf("synced %d times after %d batches, want 1 and 1", p.Host.SyncedCalls(), p.Host.Batches())
	}
	if diff := cmp.Diff(map[string]uint8{"guard.in": 1, "guard.audit": 2}, p.Assignment.Tables); diff != "" {
		t.Errorf("tables declared from the config (-want +got):\n%s", diff)
	}
}
