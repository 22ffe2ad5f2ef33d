package sdk

import (
	"fmt"

	"switchyard.dev/switchyard/sdk/flow"
)

// MissAction is what a table does with a packet no flow matched.
type MissAction uint8

const (
	// MissDrop drops the packet (the OpenFlow default).
	MissDrop MissAction = iota
	// MissNext continues in the next table of the pipeline.
	MissNext
	// MissController sends the packet to the owning plugin (PacketInHandler).
	MissController
)

func (m MissAction) String() string {
	switch m {
	case MissDrop:
		return "drop"
	case MissNext:
		return "next"
	case MissController:
		return "controller"
	}
	return fmt.Sprintf("miss(%d)", uint8(m))
}

// Table declares a table the plugin owns. The host assigns its ID inside the
// stage's range of table IDs.
type Table struct {
	// Name is unique across all plugins on the node (e.g. "podnet.classifier"
	// or "Classifier"); flows name tables by it.
	Name     string
	Pipeline flow.Pipeline
	Stage    flow.Stage
	Miss     MissAction
	// Exported lets other plugins add flows to this table. A private table
	// accepts flows from its owner only.
	Exported bool
	// After and Before name tables of the same pipeline and stage (the
	// plugin's own or another's) this table must come after or before: a
	// stage's tables run in ID order. The host assigns IDs that honour
	// them, also against tables loaded later, or refuses the plugin naming
	// both tables.
	After, Before []string
}

// Capability is something a plugin can do beyond submitting flows. The SDK
// derives the list from the interfaces the feature implements.
type Capability string

const (
	CapCNI          Capability = "cni"
	CapPodInterface Capability = "pod-interface-events"
	CapPacketIn     Capability = "packet-in"
	CapNodeEvents   Capability = "node-events"
	CapNodeFacts    Capability = "node-facts-events"
)

// Capabilities lists the capabilities f has.
func Capabilities(f Feature) []Capability {
	var cs []Capability
	if _, ok := f.(CNIHandler); ok {
		cs = append(cs, CapCNI)
	}
	if _, ok := f.(PodInterfaceSubscriber); ok {
		cs = append(cs, CapPodInterface)
	}
	if _, ok := f.(PacketInHandler); ok {
		cs = append(cs, CapPacketIn)
	}
	if _, ok := f.(NodeEventSubscriber); ok {
		cs = append(cs, CapNodeEvents)
	}
	if _, ok := f.(FlowRemovedHandler); ok {
		cs = append(cs, CapFlowRemoved)
	}
	if _, ok := f.(NodeFactsSubscriber); ok {
		cs = append(cs, CapNodeFacts)
	}
	if _, ok := f.(MetricsReporter); ok {
		cs = append(cs, CapMetrics)
	}
	if _, ok := f.(FlowDescriber); ok {
		cs = append(cs, CapDescribeFlows)
	}
	return cs
}

// Assignment is what the host gave the plugin: concrete table IDs, register
// bits, cookie bits and node facts. Plugins rarely need it — flows are
// written symbolically — but it is useful for logging and debugging.
type Assignment struct {
	// Tables maps every table name the plugin may use (its own and exported
	// ones) to its ID.
	Tables map[string]uint8
	// Fields maps the plugin's fields and the well-known fields to bits.
	Fields map[string]flow.Bits
	// CookiePrefix is the upper 16 bits of every flow cookie of this plugin.
	CookiePrefix uint16
	// Round is the plugin's incarnation, the next 16 bits of the cookie.
	Round uint16
	// Grants maps each resource the plugin requested, and each one another
	// plugin published, by name to what the host granted.
	Grants map[string]Grant
}

// ResourceKind is a kind of shared switch resource that, like tables and
// registers, the host hands out so plugins cannot collide on it.
type ResourceKind uint8

const (
	// ResourceCTZone is one conntrack zone (Width is ignored); use
	// Grant.Value in ct(zone=) and ct_zone matches.
	ResourceCTZone ResourceKind = iota + 1
	// ResourceCTMark is Width bits of ct_mark.
	ResourceCTMark
	// ResourceMetadata is Width bits of the OpenFlow metadata field.
	ResourceMetadata
	// ResourcePktMark is Width bits of pkt_mark, the packet mark the
	// switch shares with the node's kernel (nftables, routing rules).
	ResourcePktMark
	// ResourceCTLabel is Width (at most 64) bits of the 128-bit
	// ct_label; Offset may be anywhere in the 128 bits.
	ResourceCTLabel
)

// ResourceMaxKind is the highest ResourceKind this SDK knows.
const ResourceMaxKind = ResourceCTLabel

func (k ResourceKind) String() string {
	switch k {
	case ResourceCTZone:
		return "ct_zone"
	case ResourceCTMark:
		return "ct_mark"
	case ResourceMetadata:
		return "metadata"
	case ResourcePktMark:
		return "pkt_mark"
	case ResourceCTLabel:
		return "ct_label"
	}
	return fmt.Sprintf("resource(%d)", uint8(k))
}

// Resource is a shared resource a plugin requests in Describe, by name
// (unique on the node, like table names). Exported publishes it: every
// plugin then finds it in its Assignment.Grants and may use it.
type Resource struct {
	Kind     ResourceKind
	Name     string
	Width    uint8
	Exported bool
}

// Grant is what the host granted for a resource: a zone number in Value,
// or bits Offset..Offset+Width-1 of ct_mark, metadata, pkt_mark or
// ct_label.
type Grant struct {
	Kind   ResourceKind
	Owner  string
	Value  uint32
	Offset uint8
	Width  uint8
}

// Mask is the grant's bits as a mask (0 for a zone). For ct_label it is
// the low 64 bits of Mask128.
func (g Grant) Mask() uint64 { return g.Mask128().Lo }

// Mask128 is the grant's bits as a 128-bit mask (zero for a zone): the
// form a ct_label match or ct(exec(set_field)) takes.
func (g Grant) Mask128() flow.Uint128 {
	if g.Kind == ResourceCTZone || g.Width == 0 {
		return flow.Uint128{}
	}
	ones := ^uint64(0)
	if g.Width < 64 {
		ones = uint64(1)<<g.Width - 1
	}
	switch off := uint(g.Offset); {
	case off == 0:
		return flow.Uint128{Lo: ones}
	case off >= 64:
		return flow.Uint128{Hi: ones << (off - 64)}
	default:
		return flow.Uint128{Hi: ones >> (64 - off), Lo: ones << off}
	}
}
