package main

import (
	"slices"
	"strings"
	"testing"

	"switchyard.dev/switchyard/itest/kit"
)

// TestBlocksOnARealSwitch runs the built plugin on a real node through the
// Switchyard test kit: real OVS, the real agent, podnet wiring two pods by
// CNI. TCP to a blocked port is dropped, another port connects, and the
// drop flow is on the switch. It needs root and Open vSwitch, like every
// integration test (`make test` runs it).
func TestBlocksOnARealSwitch(t *testing.T) {
	n := kit.StartNode(t, kit.Options{
		WithPodnet: true,
		Plugins: []kit.Plugin{{
			Name:    "template",
			Package: "example.com/switchyard-template", // this module, built by the kit
			Config:  Config{BlockTCPPorts: []uint16{2323}},
		}},
	})
	n.WaitSynced()
	a, b := n.AddPod("a"), n.AddPod("b")

	if got := n.Probe(a, b, kit.TCP, 8080); got != kit.Connected {
		t.Errorf("TCP a -> b:8080 (not blocked): %s, want %s", got, kit.Connected)
	}
	if got := n.Probe(a, b, kit.TCP, 2323); got != kit.Timeout {
		t.Errorf("TCP a -> b:2323 (blocked, dropped): %s, want %s", got, kit.Timeout)
	}

	// The table holds the drop and the table-miss flow (MissNext) the
	// agent installs for the plugin.
	flows := n.Flows("template", tableBlock)
	drops := slices.DeleteFunc(slices.Clone(flows), func(f string) bool {
		return !strings.HasSuffix(f, "priority=100,tcp,tp_dst=2323 actions=drop")
	})
	if len(drops) != 1 {
		t.Errorf("the agent records template's flows in %s as %q, want one drop of tcp,tp_dst=2323", tableBlock, flows)
	}
	sw := n.SwitchFlows("template", tableBlock)
	slices.Sort(sw)
	slices.Sort(flows)
	if !slices.Equal(sw, flows) {
		t.Errorf("the switch holds %q in %s, the agent records %q", sw, tableBlock, flows)
	}
}
