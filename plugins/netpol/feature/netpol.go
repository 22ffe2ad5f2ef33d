package feature

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"switchyard.dev/switchyard/controller/client"
	"switchyard.dev/switchyard/plugins/internal/clusterclient"
	"switchyard.dev/switchyard/plugins/netpol/flows"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Version of the plugin, reported in Describe.
const Version = "0.1.0"

// Config is netpol's section of the agent config.
type Config struct {
	// StateDir holds the last known span (policy.state), so a restarted
	// plugin enforces it while the controller is unreachable.
	StateDir string `json:"stateDir,omitempty"`
	// Plaintext dials the controller without TLS: for a controller on
	// loopback or behind a mesh, as the controller's own plaintext mode.
	Plaintext bool `json:"plaintext,omitempty"`
	// LogFile receives one JSON line per logged or rejected packet
	// (default: StateDir/decisions.log).
	LogFile string `json:"logFile,omitempty"`
	// CountersInterval is how often per-rule counters are read back from
	// the switch into StateDir/counters.json (default 10s; "0s" turns it
	// off).
	CountersInterval string `json:"countersInterval,omitempty"`
	// SyncWait bounds how long a first start (nothing saved) waits for the
	// controller's snapshot before it reports synced (default 30s).
	SyncWait string `json:"syncWait,omitempty"`
}

// DefaultStateDir is where netpol keeps its state without a config.
const DefaultStateDir = "/var/lib/switchyard/netpol"

// rejectMeter rate-limits Reject and logging packet-ins.
const rejectMeter = 1

// Netpol implements sdk.Feature: it enforces the node's policy span.
type Netpol struct {
	log *slog.Logger

	mu        sync.Mutex
	host      sdk.Host
	cfg       Config
	node      flows.Node
	statePath string
	installed map[flow.Key]flow.Flow
	rules     map[uint32]*flows.Rule
	realized  map[string]int64
	synced    bool // Host.Synced was called
	client    *client.Client
	dirty     bool // the last apply failed; retry
	last      *client.State
	decisions *os.File
	// lastCounters are the rule counters countersLoop read last, for
	// Metrics (a scrape does no I/O).
	lastCounters []RuleCounters

	reports chan map[string]int64
	// kick wakes the worker; pendingSnapshot says a complete span came.
	kick            chan struct{}
	pendingSnapshot bool
	cancel          context.CancelFunc
	wg              sync.WaitGroup
}

var (
	_ sdk.Feature             = (*Netpol)(nil)
	_ sdk.Stopper             = (*Netpol)(nil)
	_ sdk.PacketInHandler     = (*Netpol)(nil)
	_ client.Handler          = (*Netpol)(nil)
	_ sdk.NodeFactsSubscriber = (*Netpol)(nil)
)

// NodeFactsChanged follows a new pod CIDR or node IP: the node's own
// addresses, whose traffic to its pods passes, change with them.
func (p *Netpol) NodeFactsChanged(ctx context.Context, req sdk.NodeFactsChangedRequest, _ *sdk.NodeFactsChangedResponse) error {
	p.mu.Lock()
	p.node.Trusted = trusted(req.New)
	started := p.client != nil
	p.mu.Unlock()
	if started {
		p.kickWorker(false)
	}
	return nil
}

// New returns an unstarted netpol.
func New() *Netpol { return &Netpol{log: slog.Default()} }

// Describe declares netpol's tables, its conntrack zone and the bypass bit.
func (p *Netpol) Describe(_ context.Context, _ sdk.DescribeRequest, resp *sdk.DescribeResponse) error {
	resp.Name = "netpol"
	resp.Version = Version
	resp.Tables = flows.Tables()
	resp.Fields = []flow.Field{flows.Bypass, flows.Epoch, flows.CTReply, flows.CTRelated, flows.CTNew}
	resp.Resources = []sdk.Resource{{Kind: sdk.ResourceCTZone, Name: flows.CTZoneResource}}
	return nil
}

// Start enforces the saved span at once, then follows the controller.
func (p *Netpol) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	cfg := Config{StateDir: DefaultStateDir}
	if len(req.Config) > 0 && string(req.Config) != "null" {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return fmt.Errorf("netpol config: %w", err)
		}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	if cfg.LogFile == "" {
		cfg.LogFile = filepath.Join(cfg.StateDir, "decisions.log")
	}
	syncWait := 30 * time.Second
	if cfg.SyncWait != "" {
		d, err := time.ParseDuration(cfg.SyncWait)
		if err != nil {
			return fmt.Errorf("netpol config syncWait %q: %w", cfg.SyncWait, err)
		}
		syncWait = d
	}
	countersEvery := 10 * time.Second
	if cfg.CountersInterval != "" {
		d, err := time.ParseDuration(cfg.CountersInterval)
		if err != nil {
			return fmt.Errorf("netpol config countersInterval %q: %w", cfg.CountersInterval, err)
		}
		countersEvery = d
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return fmt.Errorf("netpol state dir: %w", err)
	}
	dec, err := os.OpenFile(cfg.LogFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("netpol decision log: %w", err)
	}
	grant, ok := req.Assignment.Grants[flows.CTZoneResource]
	if !ok {
		dec.Close()
		return fmt.Errorf("the host granted no conntrack zone %q", flows.CTZoneResource)
	}
	log := req.Host.Logger()
	p.mu.Lock()
	p.host, p.log, p.cfg, p.decisions = req.Host, log, cfg, dec
	p.node = flows.Node{Trusted: trusted(req.Node), CTZone: uint16(grant.Value), RejectMeter: rejectMeter, Epoch: p.node.Epoch}
	p.statePath = filepath.Join(cfg.StateDir, "policy.state")
	p.node.Epoch = loadEpoch(p.epochPath())
	p.installed = map[flow.Key]flow.Flow{}
	p.reports = make(chan map[string]int64, 1)
	p.kick = make(chan struct{}, 1)
	p.mu.Unlock()

	// The meter first, in its own batch: it outlives rounds.
	meter := flow.Meter{ID: rejectMeter, Unit: flow.MeterPktps, Bands: []flow.MeterBand{{Rate: 200}}}
	if err := req.Host.Apply(ctx, flow.NewBatch().AddMeter(meter)); err != nil {
		log.Warn("adding the packet-in meter failed; retrying as a modify", "error", err)
		if err := req.Host.Apply(ctx, flow.NewBatch().ModifyMeter(meter)); err != nil {
			return fmt.Errorf("netpol packet-in meter: %w", err)
		}
	}

	saved, err := client.Load(p.statePath)
	switch {
	case errors.Is(err, client.ErrNoState):
		saved = nil
	case err != nil:
		log.Warn("the saved policy state is unusable; starting empty until the controller answers", "path", p.statePath, "error", err)
		saved = nil
	}
	initial := saved
	if initial == nil {
		initial = client.NewState()
	}
	if err := p.sync(ctx, initial, "start"); err != nil {
		return err
	}
	if saved != nil {
		// The saved span is enforced: the previous incarnation's flows can
		// go (they are the same ones, so nothing changes on the switch).
		if err := p.markSynced(ctx); err != nil {
			return err
		}
		log.Info("enforcing the saved policy span", "policies", len(saved.Policies), "epoch", saved.Epoch, "version", saved.Version)
	}

	runCtx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	ctrl := req.Cluster.Controller
	if ctrl.URL == "" {
		log.Warn("no controller address in the agent config (controller.address): enforcing the saved span only")
		if saved == nil {
			if err := p.markSynced(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	ccfg := client.Config{Address: ctrl.URL, NodeName: req.Node.Name, Handler: p, Initial: saved,
		Log: log.With("component", "policy-stream")}
	if req.Cluster.Tokens != nil {
		ccfg.Token = req.Cluster.Tokens.Token
	}
	if !cfg.Plaintext {
		tc, err := ctrl.TLSConfig()
		if err != nil {
			cancel()
			return fmt.Errorf("controller TLS: %w", err)
		}
		ccfg.TLS = tc
	}
	// An address naming the controller's Service is found through the
	// apiserver: this node's DNS and Service proxy may not work yet.
	if sa, ok := client.ParseServiceAddress(ctrl.URL); ok && req.Cluster.APIServer.URL != "" {
		kube, err := clusterclient.Clientset(req.Cluster, "switchyard-netpol")
		if err != nil {
			cancel()
			return err
		}
		ccfg.Discovery = &client.ServiceDiscovery{Kube: kube, Addr: sa}
	}
	c, err := client.New(ccfg)
	if err != nil {
		cancel()
		return err
	}
	p.mu.Lock()
	p.client = c
	p.mu.Unlock()
	if countersEvery > 0 {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.countersLoop(runCtx, countersEvery) }()
	}
	p.wg.Add(4)
	go func() { defer p.wg.Done(); _ = c.Run(runCtx) }()
	go func() { defer p.wg.Done(); p.reportLoop(runCtx) }()
	go func() { defer p.wg.Done(); p.worker(runCtx) }()
	go func() { defer p.wg.Done(); p.syncWaitLoop(runCtx, syncWait) }()
	log.Info("netpol started", "controller", ctrl.URL, "ct_zone", grant.Value, "trusted", p.node.Trusted, "state", p.statePath)
	return nil
}

// trusted are the node's own addresses: its IPs, and the gateway address of
// each pod CIDR (the first address), which the node's traffic to its pods
// comes from.
func trusted(n sdk.NodeFacts) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	add := func(a netip.Addr) {
		if a.IsValid() && !seen[a.Unmap()] {
			seen[a.Unmap()] = true
			out = append(out, a.Unmap())
		}
	}
	add(n.GatewayIP)
	for _, c := range n.PodCIDRs {
		add(c.Masked().Addr().Next())
	}
	for _, a := range n.NodeIPs {
		add(a)
	}
	return out
}

// Stop ends the stream and the loops; the flows stay on the switch, so
// enforcement goes on while the plugin is away.
func (p *Netpol) Stop(context.Context, sdk.StopRequest, *sdk.StopResponse) error {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client != nil {
		p.client.Close()
	}
	if p.decisions != nil {
		p.decisions.Close()
	}
	return nil
}

// Replace is a complete span from the controller.
func (p *Netpol) Replace(s *client.State) { p.kickWorker(true) }

// Apply is one incremental change.
func (p *Netpol) Apply(s *client.State, c client.Change) { p.kickWorker(false) }

// kickWorker tells the worker the span changed. Changes that arrive while
// it computes and applies are coalesced into its next round, so a burst of
// events costs a few rounds, not one per event.
func (p *Netpol) kickWorker(snapshot bool) {
	p.mu.Lock()
	p.pendingSnapshot = p.pendingSnapshot || snapshot
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// worker enforces the client's current span after every kick (and retries
// a failed round every second).
func (p *Netpol) worker(ctx context.Context) {
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-retry.C:
			p.mu.Lock()
			dirty := p.dirty
			p.mu.Unlock()
			if !dirty {
				continue
			}
		}
		p.mu.Lock()
		snapshot := p.pendingSnapshot
		p.pendingSnapshot = false
		p.mu.Unlock()
		why := "change"
		if snapshot {
			why = "snapshot"
		}
		p.enforceCurrent(ctx, why, snapshot)
	}
}

func (p *Netpol) enforceCurrent(ctx context.Context, why string, snapshot bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var err error
	// The span is read under the client's lock, so the stream waits while
	// it is computed: the state cannot change underneath.
	p.client.View(func(s *client.State) {
		if err = p.sync(ctx, s, why); err != nil {
			return
		}
		if e := s.Save(p.statePath); e != nil {
			p.log.Error("saving the policy span failed; a restart while the controller is down would enforce an older one", "path", p.statePath, "error", e)
		}
	})
	if err != nil {
		p.log.Error("enforcing the policy span failed; retrying", "change", why, "error", err)
		if snapshot {
			p.mu.Lock()
			p.pendingSnapshot = true
			p.mu.Unlock()
		}
		return
	}
	if snapshot {
		if err := p.markSynced(ctx); err != nil {
			p.log.Error("reporting synced to the host failed", "error", err)
		}
	}
}

func (p *Netpol) markSynced(ctx context.Context) error {
	p.mu.Lock()
	done := p.synced
	p.synced = true
	p.mu.Unlock()
	if done {
		return nil
	}
	return p.host.Synced(ctx)
}

// sync computes the flows for s and submits the difference to what the
// switch holds, as one batch: nothing when nothing changed.
func (p *Netpol) sync(ctx context.Context, s *client.State, why string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := time.Now()
	res := flows.Compute(s, p.node)
	if len(res.Unplaced) > 0 {
		p.log.Error("native rules beyond what one table's priorities hold are not enforced; their policies are not reported realized",
			"policies", len(res.Unplaced))
	}
	realized := make(map[string]int64, len(s.Policies))
	for uid, pol := range s.Policies {
		if res.Unplaced[uid] == 0 {
			realized[uid] = pol.Generation
		}
	}
	p.last = s
	want := make(map[flow.Key]flow.Flow, len(res.Flows))
	var adds, mods, dels []flow.Flow
	for i, f := range res.Flows {
		k := res.Keys[i]
		want[k] = f
		old, ok := p.installed[k]
		switch {
		case !ok:
			adds = append(adds, f)
		case !flows.SameFlow(&old, &f):
			mods = append(mods, f)
		}
	}
	for k, f := range p.installed {
		if _, ok := want[k]; !ok {
			dels = append(dels, f)
		}
	}
	bumped := false
	if len(p.installed) > 0 && len(adds)+len(mods)+len(dels) > 0 {
		// The rules change: move the epoch in the same batch, so no cached
		// datapath verdict of the old rules survives (see flows.Epoch).
		p.node.Epoch++
		bumped = true
		for _, f := range flows.EpochFlows(p.node) {
			want[f.Key()] = f
			mods = append(mods, f)
		}
	}
	added, changed, deleted := len(adds), len(mods), len(dels)
	batches := p.batches(adds, mods, dels)
	for i, b := range batches {
		if err := p.host.Apply(ctx, b); err != nil {
			p.dirty = true
			if i > 0 {
				// Part of the change is on the switch: forget what we
				// believe is installed, so the retry rewrites everything.
				p.installed = map[flow.Key]flow.Flow{}
			}
			return fmt.Errorf("applying %d flow changes (%s, batch %d of %d): %w", added+changed+deleted, why, i+1, len(batches), err)
		}
	}
	p.dirty = false
	p.installed, p.rules = want, res.Rules
	if bumped {
		if err := saveEpoch(p.epochPath(), p.node.Epoch); err != nil {
			p.log.Warn("saving the flow epoch failed; a restarted netpol rewrites its conntrack flows once", "path", p.epochPath(), "error", err)
		}
	}
	p.log.Info("policy span enforced", "change", why, "policies", len(s.Policies), "rules", len(res.Rules),
		"flows", len(want), "added", added, "changed", changed, "deleted", deleted,
		"took", time.Since(start).Round(time.Microsecond).String())
	p.realized = realized
	select {
	case <-p.reports:
	default:
	}
	p.reports <- realized
	return nil
}

// maxBatchOps keeps a batch under the host's default batch limit (20,000).
const maxBatchOps = 16000

// batches is the change as one batch (one bundle: no packet sees half of
// it), or, when it is larger than a batch may be (a first snapshot of
// tens of thousands of rules), as several: the new flows first, then the
// changed ones, then the deletions, so a rule is never missing between
// its old and new flows.
func (p *Netpol) batches(adds, mods, dels []flow.Flow) []*flow.Batch {
	if len(adds)+len(mods)+len(dels) == 0 {
		return nil
	}
	if len(adds)+len(mods)+len(dels) <= maxBatchOps {
		return []*flow.Batch{flow.NewBatch().AddFlows(adds...).AddFlows(mods...).DeleteFlows(dels...)}
	}
	var out []*flow.Batch
	cur := flow.NewBatch()
	push := func(f flow.Flow, del bool) {
		if cur.Len() == maxBatchOps {
			out = append(out, cur)
			cur = flow.NewBatch()
		}
		if del {
			cur.DeleteFlows(f)
		} else {
			cur.AddFlows(f)
		}
	}
	for _, f := range adds {
		push(f, false)
	}
	for _, f := range mods {
		push(f, false)
	}
	for _, f := range dels {
		push(f, true)
	}
	return append(out, cur)
}

// reportLoop tells the controller what is realized, the latest only.
func (p *Netpol) reportLoop(ctx context.Context) {
	var pending map[string]int64
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-p.reports:
			pending = r
		case <-tick.C:
		}
		if pending == nil || p.client == nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := p.client.Report(rctx, pending)
		cancel()
		if err != nil {
			p.log.Debug("reporting realization failed; retrying", "error", err)
			continue
		}
		pending = nil
	}
}

// syncWaitLoop reports synced after syncWait when the controller never
// answered on a first start (nothing saved), so the host can sweep.
func (p *Netpol) syncWaitLoop(ctx context.Context, syncWait time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(syncWait):
	}
	p.mu.Lock()
	synced := p.synced
	p.mu.Unlock()
	if !synced {
		p.log.Warn("no policy snapshot from the controller yet; reporting synced with what is known", "waited", syncWait)
		if err := p.markSynced(ctx); err != nil {
			p.log.Error("reporting synced failed", "error", err)
		}
	}
}

// Rules returns the installed rules by tag (for counters).
func (p *Netpol) Rules() map[uint32]*flows.Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rules
}

// epochPath is where the flow epoch (flows.Epoch) survives a restart, so
// a restarted netpol submits exactly the flows the switch holds.
func (p *Netpol) epochPath() string {
	if p.statePath == "" {
		return ""
	}
	return p.statePath + ".epoch"
}

// loadEpoch reads the saved epoch; anything unreadable is 0 (the first
// change after the restart moves it on anyway).
func loadEpoch(path string) uint16 {
	if path == "" {
		return 0
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 16)
	if err != nil {
		return 0
	}
	return uint16(v)
}

func saveEpoch(path string, v uint16) error {
	if path == "" {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatUint(uint64(v), 10)+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
