package main

import (
	"slices"
	"testing"

	"switchyard.dev/switchyard/sdk/sdktest"
)

// TestBlocksConfiguredPorts runs the plugin against the SDK's fake host,
// over the real wire: one drop flow per configured port, then Synced.
func TestBlocksConfiguredPorts(t *testing.T) {
	p := sdktest.Start(t, blocker{}, sdktest.Options{Config: []byte(`{"blockTCPPorts": [23, 2323]}`)})
	want := []string{
		"table=template.block, priority=100, tcp,tp_dst=23 actions=drop",
		"table=template.block, priority=100, tcp,tp_dst=2323 actions=drop",
	}
	if got := p.Host.FlowTexts(tableBlock); !slices.Equal(got, want) {
		t.Errorf("flows:\n got %q\nwant %q", got, want)
	}
	if p.Host.SyncedCalls() != 1 {
		t.Errorf("Synced called %d times, want 1", p.Host.SyncedCalls())
	}
}
