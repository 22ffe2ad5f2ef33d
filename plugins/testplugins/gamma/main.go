// Command gamma is a test plugin for the SDK's read-back: it forwards
// between the first two configured ports — a classifier that marks the
// packet in a register field, a forwarding table that sends mark 1
// through a group and a meter and mark 2 straight out — with every flow
// tagged by the port it serves. A control socket (config "control") lets
// the test read the flows back, delete them by tag, and see what the
// packet-in, packet-out and flow-removed paths delivered.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"switchyard.dev/switchyard/plugins/testplugins/internal/tpconf"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

const (
	tClass = "gamma.class"
	tFwd   = "gamma.fwd"
	tPunt  = "gamma.punt" // after conntrack: punts tracked packets
	// Tags: 0x100|i for port i's flows, 0x200 for the punt flow, 0x300
	// for the flow with an idle timeout.
	tagPort, tagPunt, tagIdle = 0x100, 0x200, 0x300
)

var mark = flow.Field{Name: "gamma.mark", Width: 8}

// punt is the address whose ICMP gamma sends to itself.
var punt = netip.MustParseAddr("10.0.0.99")

type gamma struct {
	mu       sync.Mutex
	host     sdk.Host
	ports    []tpconf.Port
	packetIn []packetInRecord
	removed  []string
	srv      *http.Server
}

type packetInRecord struct {
	Table     string            `json:"table"`
	Tag       uint32            `json:"tag"`
	InPort    uint32            `json:"inPort"`
	Fields    map[string]uint32 `json:"fields"`
	CTState   uint32            `json:"ctState"`
	CTZone    uint16            `json:"ctZone"`
	CTSrc     string            `json:"ctSrc"`
	CTDst     string            `json:"ctDst"`
	CTProto   uint8             `json:"ctProto"`
	OutErr    string            `json:"packetOutError"`
	RefuseErr string            `json:"refusedResumeError"`
}

// zoneName is gamma's ct zone resource.
const zoneName = "gamma.zone"

func (*gamma) Describe(_ context.Context, _ sdk.DescribeRequest, r *sdk.DescribeResponse) error {
	r.Name, r.Version = "gamma", "1.0.0"
	r.Tables = []sdk.Table{
		{Name: tClass, Pipeline: flow.PipelineRoot, Stage: flow.StageClassifier},
		{Name: tFwd, Pipeline: flow.PipelineIP, Stage: flow.StageSwitching},
		{Name: tPunt, Pipeline: flow.PipelineIP, Stage: flow.StageOutput},
	}
	r.Fields = []flow.Field{mark}
	// The punt path's conntrack zone is granted by the host, as every
	// shared resource is.
	r.Resources = []sdk.Resource{{Kind: sdk.ResourceCTZone, Name: zoneName}}
	return nil
}

func (g *gamma) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	cfg, err := tpconf.Parse(req.Config)
	if err != nil {
		return err
	}
	if len(cfg.Ports) != 2 {
		return fmt.Errorf("gamma needs exactly two ports, got %d", len(cfg.Ports))
	}
	h := req.Host
	zone := uint16(req.Assignment.Grants[zoneName].Value)
	var ofports [2]uint32
	for i, p := range cfg.Ports {
		port, err := h.CreatePort(ctx, sdk.PortRequest{Name: p.Name, OFPort: p.OFPort})
		if err != nil {
			return fmt.Errorf("attach %s: %w", p.Name, err)
		}
		ofports[i] = port.OFPort
	}
	b := flow.NewBatch().
		AddMeter(flow.Meter{ID: 1, Unit: flow.MeterPktps, Bands: []flow.MeterBand{{Rate: 100000}}}).
		AddGroup(flow.Group{ID: 1, Type: flow.GroupAll, Buckets: []flow.Bucket{{Actions: []flow.Action{flow.Output(ofports[1])}}}})
	for i, port := range ofports {
		other := ofports[1-i]
		tag := uint32(tagPort | i)
		in := flow.Match{}.InPort(port)
		b.AddFlows(
			flow.Flow{Table: tClass, Priority: 100, Tag: tag, Match: in.IPv4(),
				Actions: []flow.Action{flow.LoadField(mark, uint32(i+1))}, Goto: flow.GotoTable(tFwd)},
			flow.Flow{Table: tClass, Priority: 100, Tag: tag, Match: in.ARP(), Actions: []flow.Action{flow.Output(other)}},
		)
	}
	b.AddFlows(
		flow.Flow{Table: tFwd, Priority: 100, Tag: tagPort, Match: flow.Match{}.Field(mark, 1),
			Actions: []flow.Action{flow.ApplyMeter(1), flow.ApplyGroup(1)}},
		flow.Flow{Table: tFwd, Priority: 100, Tag: tagPort | 1, Match: flow.Match{}.Field(mark, 2),
			Actions: []flow.Action{flow.Output(ofports[0])}},
		// The punted packet goes through conntrack first, so its
		// packet-in carries ct state, zone and tuple as well as the mark.
		flow.Flow{Table: tClass, Priority: 200, Tag: tagPunt, Match: flow.Match{}.ICMP4().IPv4Dst(punt),
			Actions: []flow.Action{flow.LoadField(mark, 0x5a), flow.Conntrack(flow.CT{Zone: zone, Resume: flow.GotoTable(tPunt)})}},
		flow.Flow{Table: tPunt, Priority: 200, Tag: tagPunt, Match: flow.Match{}.ICMP4().CTState(flow.CTTracked, flow.CTTracked),
			Actions: []flow.Action{flow.Controller(0xffff, nil)}},
		flow.Flow{Table: tClass, Priority: 50, Tag: tagIdle, IdleTimeout: 1, Match: flow.Match{}.IPv4().IPv4Dst(netip.MustParseAddr("10.9.9.9"))},
	)
	if err := h.Apply(ctx, b); err != nil {
		return err
	}
	g.mu.Lock()
	g.host, g.ports = h, cfg.Ports
	g.mu.Unlock()
	if cfg.Control != "" {
		if err := g.serve(cfg.Control); err != nil {
			return err
		}
	}
	return h.Synced(ctx)
}

// PacketIn records the metadata, then re-injects the packet towards the
// second port by resuming at gamma.fwd with mark 1 (after trying a table
// it may not write, which the host must refuse).
func (g *gamma) PacketIn(ctx context.Context, req sdk.PacketInRequest, _ *sdk.PacketInResponse) error {
	g.mu.Lock()
	h, ports := g.host, g.ports
	g.mu.Unlock()
	rec := packetInRecord{Table: req.Table, Tag: req.Tag, InPort: req.InPort, Fields: req.Fields, CTState: req.CT.State, CTZone: req.CT.Zone}
	if t := req.CT.Tuple; t != nil {
		rec.CTSrc, rec.CTDst, rec.CTProto = t.Src.String(), t.Dst.String(), t.Proto
	}
	if err := h.PacketOut(ctx, sdk.PacketOut{InPort: req.InPort, Data: req.Data, ResumeTable: "no.such.table"}); err != nil {
		rec.RefuseErr = err.Error()
	}
	p := ports[1]
	if err := h.PacketOut(ctx, sdk.PacketOut{InPort: req.InPort, Data: req.Data, ResumeTable: tFwd,
		Actions: []flow.Action{flow.SetEthDst(p.HW()), flow.SetIPv4Dst(p.Addr()), flow.LoadField(mark, 1)}}); err != nil {
		rec.OutErr = err.Error()
	}
	g.mu.Lock()
	g.packetIn = append(g.packetIn, rec)
	g.mu.Unlock()
	return nil
}

// FlowRemoved records flows the switch timed out.
func (g *gamma) FlowRemoved(_ context.Context, req sdk.FlowRemovedRequest, _ *sdk.FlowRemovedResponse) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removed = append(g.removed, req.Flow.String())
	return nil
}

func (g *gamma) Stop(ctx context.Context, _ sdk.StopRequest, _ *sdk.StopResponse) error {
	g.mu.Lock()
	srv := g.srv
	g.mu.Unlock()
	if srv != nil {
		return srv.Shutdown(ctx)
	}
	return nil
}

// flowJSON is one read-back flow as the control socket reports it.
type flowJSON struct {
	Flow    string `json:"flow"`
	Table   string `json:"table"`
	Tag     uint32 `json:"tag"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

func uintParam(r *http.Request, name string) uint32 {
	v, _ := strconv.ParseUint(r.URL.Query().Get(name), 0, 32)
	return uint32(v)
}

func (g *gamma) serve(path string) error {
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	reply := func(w http.ResponseWriter, v any, err error) {
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}
	host := func() sdk.Host { g.mu.Lock(); defer g.mu.Unlock(); return g.host }
	mux := http.NewServeMux()
	mux.HandleFunc("GET /flows", func(w http.ResponseWriter, r *http.Request) {
		fs, err := host().Flows(r.Context(), sdk.FlowFilter{Table: r.URL.Query().Get("table"), Tag: uintParam(r, "tag"), TagMask: uintParam(r, "mask")})
		out := []flowJSON{}
		for _, f := range fs {
			out = append(out, flowJSON{Flow: f.Flow.String(), Table: f.Flow.Table, Tag: f.Flow.Tag, Packets: f.Packets, Bytes: f.Bytes})
		}
		reply(w, out, err)
	})
	mux.HandleFunc("GET /groups", func(w http.ResponseWriter, r *http.Request) {
		gs, err := host().GroupStats(r.Context())
		reply(w, gs, err)
	})
	mux.HandleFunc("GET /meters", func(w http.ResponseWriter, r *http.Request) {
		ms, err := host().MeterStats(r.Context())
		reply(w, ms, err)
	})
	mux.HandleFunc("POST /delete", func(w http.ResponseWriter, r *http.Request) {
		err := host().Apply(r.Context(), flow.NewBatch().DeleteTagged(r.URL.Query().Get("table"), uintParam(r, "tag"), uintParam(r, "mask")))
		reply(w, "ok", err)
	})
	mux.HandleFunc("GET /packetins", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		reply(w, append([]packetInRecord{}, g.packetIn...), nil)
	})
	mux.HandleFunc("GET /removed", func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		reply(w, append([]string{}, g.removed...), nil)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	g.mu.Lock()
	g.srv = srv
	g.mu.Unlock()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			host().Logger().Error("gamma control socket", "error", err)
		}
	}()
	return nil
}

func main() { sdk.Serve(&gamma{}) }
