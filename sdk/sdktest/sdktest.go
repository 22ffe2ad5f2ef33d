// Package sdktest runs a plugin's feature inside a unit test, against a
// fake host, over the real wire (go-plugin's in-process gRPC connection,
// as plugin.TestPluginGRPCConn sets it up): Describe, Start and every call
// back into the host cross the same conversions and gRPC services they do
// under switchyard-agent, without a process, a switch or root.
//
//	p := sdktest.Start(t, myFeature{}, sdktest.Options{Config: []byte(`{...}`)})
//	flows := p.Host.FlowTexts("my.table") // what the feature installed there
//
// The fake host records what the feature submits; it does not arbitrate
// (tests against a real switch and agent are for that).
package sdktest

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
	"switchyard.dev/switchyard/sdk/internal/testhook"
	"switchyard.dev/switchyard/sdk/internal/wire"
	"switchyard.dev/switchyard/sdk/sdkhost"
)

// Options configure Start.
type Options struct {
	// Config is the plugin's config section (JSON), given to Describe and
	// Start.
	Config []byte
	// Node is what the feature learns about the node.
	Node sdk.NodeFacts
}

// Plugin is a feature served in the test process, and its host.
type Plugin struct {
	*sdkhost.Plugin
	Host        *Host
	Description *sdk.DescribeResponse
	Assignment  sdk.Assignment
}

// Start describes and starts f, failing t on error. Tables get IDs in
// declaration order from 1, fields consecutive bits from reg4 up, ct zones
// numbers from 1 and ct_mark and metadata bits consecutive bits from 0,
// in the order the resources are declared.
func Start(t testing.TB, f sdk.Feature, o Options) *Plugin {
	t.Helper()
	fp := testhook.FeaturePlugin(f, slog.Default())
	client, server := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{wire.PluginName: fp})
	raw, err := client.Dispense(wire.PluginName)
	if err != nil {
		t.Fatalf("sdktest: dispense: %v", err)
	}
	p := &Plugin{Plugin: sdkhost.Attach("sdktest", client, raw.(*wire.Client)), Host: &Host{node: o.Node}}
	t.Cleanup(func() {
		p.Kill()
		_ = client.Close()
		server.Stop()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	desc, _, err := p.DescribeWith(ctx, sdk.DescribeRequest{Config: o.Config})
	if err != nil {
		t.Fatalf("sdktest: describe: %v", err)
	}
	p.Description = desc
	p.Assignment = assign(desc)
	p.Host.asg = p.Assignment
	if err := p.Start(ctx, sdkhost.StartArgs{Assignment: p.Assignment, Node: o.Node, Config: o.Config, Service: p.Host}); err != nil {
		t.Fatalf("sdktest: start: %v", err)
	}
	return p
}

func assign(d *sdk.DescribeResponse) sdk.Assignment {
	a := sdk.Assignment{Tables: map[string]uint8{}, Fields: flow.WellKnownBits(), CookiePrefix: 1, Round: 1}
	for i, t := range d.Tables {
		a.Tables[t.Name] = uint8(i + 1)
	}
	reg, off := uint8(4), uint8(0)
	for _, f := range d.Fields {
		if int(off)+int(f.Width) > 32 {
			reg, off = reg+1, 0
		}
		a.Fields[f.Name] = flow.Bits{Reg: reg, Offset: off, Width: f.Width}
		off += f.Width
	}
	a.Grants = map[string]sdk.Grant{}
	zone, bits := uint32(1), map[sdk.ResourceKind]uint8{}
	for _, r := range d.Resources {
		g := sdk.Grant{Kind: r.Kind, Owner: d.Name, Width: r.Width}
		if r.Kind == sdk.ResourceCTZone {
			g.Value, g.Width = zone, 0
			zone++
		} else {
			g.Offset = bits[r.Kind]
			bits[r.Kind] += r.Width
		}
		a.Grants[r.Name] = g
	}
	return a
}

// Host is the fake host: it records batches, keeps the flows they leave
// installed, and serves ports it was given or created.
type Host struct {
	mu      sync.Mutex
	node    sdk.NodeFacts
	asg     sdk.Assignment
	batches []*flow.Batch
	flows   []flow.Flow
	ports   map[string]sdk.Port
	labels  map[string]map[string]string // external_ids by port
	synced  int
	outs    []sdk.PacketOut
	// ApplyErr, if set, decides whether a batch is refused.
	ApplyErr func(*flow.Batch) error
}

var _ sdkhost.HostService = (*Host)(nil)

func key(f *flow.Flow) string {
	c := *f
	c.Actions, c.Goto, c.Tag = nil, flow.Jump{}, 0
	return c.String()
}

// Apply records the batch and applies it to the flow list.
func (h *Host) Apply(_ context.Context, b *flow.Batch) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ApplyErr != nil {
		if err := h.ApplyErr(b); err != nil {
			return err
		}
	}
	h.batches = append(h.batches, b)
	for _, op := range b.Ops {
		if op.Flow == nil {
			continue
		}
		if op.Kind == flow.OpDeleteTagged {
			t, tag, mask := op.Flow.Table, op.Flow.Tag, op.TagMask
			h.flows = slices.DeleteFunc(h.flows, func(f flow.Flow) bool {
				return (t == "" || f.Table == t) && f.Tag&mask == tag&mask
			})
			continue
		}
		k := key(op.Flow)
		h.flows = slices.DeleteFunc(h.flows, func(f flow.Flow) bool { return key(&f) == k })
		if op.Kind != flow.OpDelete {
			h.flows = append(h.flows, *op.Flow)
		}
	}
	return nil
}

// CreatePort records a port with the next free ofport.
func (h *Host) CreatePort(_ context.Context, req sdk.PortRequest) (sdk.Port, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ports == nil {
		h.ports = map[string]sdk.Port{}
	}
	p := sdk.Port{Name: req.Name, OFPort: uint32(len(h.ports) + 1), Owner: "sdktest"}
	if req.OFPort != 0 {
		p.OFPort = req.OFPort
	}
	h.ports[req.Name] = p
	if h.labels == nil {
		h.labels = map[string]map[string]string{}
	}
	h.labels[req.Name] = maps.Clone(req.ExternalIDs)
	return p, nil
}

var _ sdk.PortLabeler = (*Host)(nil)

// LabelPort sets (or, with an empty value, removes) external_ids of a
// created port, as the agent does; PortLabels reads them back.
func (h *Host) LabelPort(_ context.Context, name string, externalIDs map[string]string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.ports[name]; !ok {
		return fmt.Errorf("%w: port %q", sdk.ErrNotFound, name)
	}
	h.labels[name] = sdk.Relabel(h.labels[name], externalIDs)
	return nil
}

// PortLabels returns a port's external_ids, as created and labelled.
func (h *Host) PortLabels(name string) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.labels[name])
}

// WaitPort returns a port created or added with AddPort: the fake host
// attaches ports at once.
func (h *Host) WaitPort(ctx context.Context, name string) (sdk.Port, error) {
	return h.Port(ctx, name)
}

// DeletePort forgets a port.
func (h *Host) DeletePort(_ context.Context, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.ports, name)
	delete(h.labels, name)
	return nil
}

// Port returns a port created or added with AddPort.
func (h *Host) Port(_ context.Context, name string) (sdk.Port, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.ports[name]
	if !ok {
		return sdk.Port{}, sdk.ErrNotFound
	}
	return p, nil
}

// AddPort makes a port exist, as if another plugin created it.
func (h *Host) AddPort(p sdk.Port) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ports == nil {
		h.ports = map[string]sdk.Port{}
	}
	h.ports[p.Name] = p
}

// PacketOut records the packet.
func (h *Host) PacketOut(_ context.Context, p sdk.PacketOut) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outs = append(h.outs, p)
	return nil
}

// Token answers as a host without cluster credentials: no token.
func (h *Host) Token(context.Context) (string, time.Time, error) { return "", time.Time{}, nil }

// NodeFacts returns Options.Node.
func (h *Host) NodeFacts(context.Context) (sdk.NodeFacts, error) { return h.node, nil }

// Synced counts the feature's Synced calls.
func (h *Host) Synced(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.synced++
	return nil
}

// FlowTexts returns the canonical text of the flows installed in table
// (all tables when table is ""), in installation order.
func (h *Host) FlowTexts(table string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, f := range h.flows {
		if table == "" || f.Table == table {
			out = append(out, f.String())
		}
	}
	return out
}

// Flows is the read-back a feature calls (sdk.Reader): the installed flows
// matching the filter, with zero counters (no packets cross a fake host).
// A delete-by-tag batch op removes flows here as the real host does.
func (h *Host) Flows(_ context.Context, f sdk.FlowFilter) ([]sdk.FlowStats, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []sdk.FlowStats
	for _, fl := range h.flows {
		if (f.Table == "" || fl.Table == f.Table) && fl.Tag&f.TagMask == f.Tag&f.TagMask {
			out = append(out, sdk.FlowStats{Flow: fl})
		}
	}
	return out, nil
}

// GroupStats answers with zero counters for the groups the feature
// installed (those of ids, or all).
func (h *Host) GroupStats(_ context.Context, ids ...uint32) ([]sdk.GroupStats, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []sdk.GroupStats
	for _, id := range h.installed(func(o flow.Op) (uint32, bool) {
		if o.Group == nil {
			return 0, false
		}
		return o.Group.ID, true
	}, ids) {
		out = append(out, sdk.GroupStats{ID: id})
	}
	return out, nil
}

// MeterStats answers with zero counters for the meters the feature
// installed (those of ids, or all).
func (h *Host) MeterStats(_ context.Context, ids ...uint32) ([]sdk.MeterStats, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []sdk.MeterStats
	for _, id := range h.installed(func(o flow.Op) (uint32, bool) {
		if o.Meter == nil {
			return 0, false
		}
		return o.Meter.ID, true
	}, ids) {
		out = append(out, sdk.MeterStats{ID: id})
	}
	return out, nil
}

// installed replays the batches to find which group or meter IDs (as idOf
// reads them) are installed now, limited to want when it is not empty.
func (h *Host) installed(idOf func(flow.Op) (uint32, bool), want []uint32) []uint32 {
	live := map[uint32]bool{}
	for _, b := range h.batches {
		for _, o := range b.Ops {
			if id, ok := idOf(o); ok {
				live[id] = o.Kind != flow.OpDelete
			}
		}
	}
	var out []uint32
	for _, id := range slices.Sorted(maps.Keys(live)) {
		if live[id] && (len(want) == 0 || slices.Contains(want, id)) {
			out = append(out, id)
		}
	}
	return out
}

// Batches returns how many batches were applied.
func (h *Host) Batches() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.batches)
}

// SyncedCalls returns how many times the feature said it was synced.
func (h *Host) SyncedCalls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.synced
}

// PacketOuts returns the packets the feature sent.
func (h *Host) PacketOuts() []sdk.PacketOut {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.outs)
}
