package sdk

import (
	"context"
	"net/netip"
	"time"

	"switchyard.dev/switchyard/sdk/flow"
)

// Reader is the read-back half of Host: what the switch really holds of
// the calling plugin's flows, groups and meters, with their counters. The
// host asks the switch (OpenFlow flow, group and meter stats) every time;
// nothing is answered from the host's memory, and nothing of another
// plugin is ever returned.
type Reader interface {
	// Flows returns the plugin's flows that match filter, as the switch
	// holds them: tables by name, registers as the plugin's named fields,
	// jumps as GotoTable of the table they resolved to. Flows the switch
	// learned from the plugin's learn actions are among them, under the
	// learning flow's tag.
	Flows(ctx context.Context, filter FlowFilter) ([]FlowStats, error)
	// GroupStats returns the counters of the plugin's groups (plugin-local
	// IDs); no IDs means all of them.
	GroupStats(ctx context.Context, ids ...uint32) ([]GroupStats, error)
	// MeterStats returns the counters of the plugin's meters (plugin-local
	// IDs); no IDs means all of them.
	MeterStats(ctx context.Context, ids ...uint32) ([]MeterStats, error)
}

// FlowFilter selects flows for Host.Flows. The zero value selects every
// flow of the plugin.
type FlowFilter struct {
	// Table, if set, limits the answer to one table the plugin may write.
	Table string
	// Tag and TagMask select flows whose Tag matches Tag in the bits set in
	// TagMask (TagMask 0: any tag).
	Tag, TagMask uint32
}

// FlowStats is one flow on the switch and its counters.
type FlowStats struct {
	Flow     flow.Flow
	Packets  uint64
	Bytes    uint64
	Duration time.Duration // how long the flow has been installed
}

// Counter counts packets and bytes.
type Counter struct{ Packets, Bytes uint64 }

// GroupStats is the counters of one group.
type GroupStats struct {
	ID       uint32 // plugin-local
	RefCount uint32 // flows and groups that use it
	Packets  uint64
	Bytes    uint64
	Duration time.Duration
	Buckets  []Counter
}

// MeterStats is the counters of one meter.
type MeterStats struct {
	ID        uint32 // plugin-local
	FlowCount uint32
	Packets   uint64 // packets that reached the meter
	Bytes     uint64
	Duration  time.Duration
	Bands     []Counter // what each band acted on (dropped)
}

// CTInfo is a packet's connection-tracking state as the switch saw it.
type CTInfo struct {
	// State holds flow.CT* bits (flow.CTTracked, flow.CTEstablished, ...).
	State uint32
	Zone  uint16
	Mark  uint32
	Label [16]byte // big-endian, as ct_label prints
	// Tuple is the original direction of the connection; nil when the
	// packet was not tracked.
	Tuple *CTTuple
}

// CTTuple is a conntrack original-direction tuple.
type CTTuple struct {
	Src, Dst         netip.Addr
	Proto            uint8
	SrcPort, DstPort uint16 // ICMP: type and code
}

// FlowRemovedHandler is implemented by features that want to hear when
// the switch removes one of their flows on its own (an idle or hard
// timeout). The host's flow store forgets the flow either way.
type FlowRemovedHandler interface {
	FlowRemoved(ctx context.Context, req FlowRemovedRequest, resp *FlowRemovedResponse) error
}

// FlowRemovedReason says why the switch removed a flow.
type FlowRemovedReason uint8

const (
	RemovedIdleTimeout FlowRemovedReason = iota
	RemovedHardTimeout
)

// FlowRemovedRequest is a flow the switch timed out, with its last
// counters.
type FlowRemovedRequest struct {
	Flow     flow.Flow
	Reason   FlowRemovedReason
	Packets  uint64
	Bytes    uint64
	Duration time.Duration
}

// FlowRemovedResponse is empty today.
type FlowRemovedResponse struct{}

// CapFlowRemoved: the plugin implements FlowRemovedHandler.
const CapFlowRemoved Capability = "flow-removed"
