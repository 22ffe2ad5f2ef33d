package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/flowstore"
	"switchyard.dev/switchyard/host/kube"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/host/pipeline"
)

// Switch is the OpenFlow side the agent needs (*openflow.Conn).
type Switch interface {
	Bundle(ctx context.Context, msgs []openflow.Message, atomic bool) error
	Send(ctx context.Context, m openflow.Message) error
	// Request sends m and waits for its reply or, for messages without one,
	// for the barrier after it (so its error is known).
	Request(ctx context.Context, m openflow.Message) (openflow.Message, error)
	Events() <-chan openflow.Event
}

// PortDB is the OVSDB side the agent needs (*ovsdb.Client).
type PortDB interface {
	CreatePort(ctx context.Context, s ovsdb.PortSpec) error
	DeletePort(ctx context.Context, name string) error
	Port(ctx context.Context, name string) (ovsdb.PortInfo, error)
	Ports(ctx context.Context, owner string) ([]ovsdb.PortInfo, error)
	WaitOFPort(ctx context.Context, name string) (uint32, error)
	FlowRestoreWait(ctx context.Context) (bool, error)
	SetFlowRestoreWait(ctx context.Context, on bool) error
}

var (
	_ Switch = (*openflow.Conn)(nil)
	_ PortDB = (*ovsdb.Client)(nil)
)

// Agent is the plugin host.
type Agent struct {
	log *slog.Logger
	sw  Switch
	db  PortDB
	// ns is the node and cluster view (node.go).
	ns nodeState

	// mu serialises arbitration, the flow store and switch writes, so a
	// plan checked against the store is still valid when it is committed.
	mu        sync.Mutex
	arb       *pipeline.Arbiter
	store     *flowstore.Store
	statePath string

	pmu     sync.Mutex
	cfg     *config.Config
	plugins map[string]*runner
	order   []string

	replays   int
	replayMu  sync.Mutex
	eventDone chan struct{}
}

// New builds an agent over a connected switch and OVSDB. It loads the
// persisted layout from cfg.RunDir so table IDs and cookie prefixes survive
// a restart of the agent.
//
// When the config sets node.podCIDRs (an explicit override, or a static
// setup without an apiserver) the node facts are known at once; otherwise
// they come from the Node object (JoinCluster).
func New(cfg *config.Config, sw Switch, db PortDB, log *slog.Logger) (*Agent, error) {
	if err := os.MkdirAll(cfg.RunDir, 0o755); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	a := &Agent{log: log, sw: sw, db: db, store: flowstore.New(), cfg: cfg,
		plugins: map[string]*runner{}, statePath: filepath.Join(cfg.RunDir, "state.json")}
	a.ns.facts = BaseFacts(cfg)
	if len(cfg.Node.PodCIDRs) > 0 {
		f, warn, err := kube.Facts(a.ns.facts, kube.Observed{}, cfg.Node, kube.Uplink)
		if err != nil {
			return nil, err
		}
		if warn != "" {
			log.Warn(warn)
		}
		a.ns.facts = a.podMTULocked(f)
		a.ns.known = true
	}
	var err error
	a.arb, err = loadState(a.statePath)
	if err != nil {
		return nil, err
	}
	return a, nil
}

func loadState(path string) (*pipeline.Arbiter, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return pipeline.New(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	var s pipeline.State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s: %w (delete it to start with a fresh layout)", path, err)
	}
	a, err := pipeline.Restore(s)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w (delete it to start with a fresh layout)", path, err)
	}
	return a, nil
}

// saveStateLocked persists the layout; a.mu must be held.
func (a *Agent) saveStateLocked() {
	b, err := json.MarshalIndent(a.arb.Snapshot(), "", " ")
	if err == nil {
		tmp := a.statePath + ".tmp"
		if err = os.WriteFile(tmp, b, 0o644); err == nil {
			err = os.Rename(tmp, a.statePath)
		}
	}
	if err != nil {
		a.log.Error("cannot persist layout; a restarted agent may renumber tables", "path", a.statePath, "error", err)
	}
}

// Start begins watching switch events, removes plugins the persisted layout
// knows but the config no longer enables, and starts the configured plugins
// in config order. It returns once every plugin had its first start attempt.
func (a *Agent) Start(ctx context.Context) error {
	a.eventDone = make(chan struct{})
	go a.events(ctx)
	if on, err := a.db.FlowRestoreWait(ctx); err == nil && on {
		// Nothing to restore yet: plugins install their flows as they start.
		a.log.Info("flow-restore-wait was set; clearing it once plugins are started")
		defer func() {
			if err := a.db.SetFlowRestoreWait(context.WithoutCancel(ctx), false); err != nil {
				a.log.Error("clear flow-restore-wait", "error", err)
			}
		}()
	}
	a.pmu.Lock()
	cfg := a.cfg
	a.pmu.Unlock()
	enabled := map[string]bool{}
	for _, p := range cfg.Plugins {
		enabled[p.Name] = true
	}
	a.mu.Lock()
	stale := []string{}
	for _, n := range a.arb.PluginNames() {
		if !enabled[n] {
			stale = append(stale, n)
		}
	}
	a.mu.Unlock()
	for _, n := range stale {
		a.log.Info("plugin in the persisted layout is no longer enabled; removing its flows, ports and tables", "plugin", n)
		a.removePlugin(ctx, n)
	}
	for _, p := range cfg.Plugins {
		a.startPlugin(ctx, p, cfg.EffectiveLimits(p))
	}
	return nil
}

// Stop stops every plugin; flows stay on the switch so traffic keeps
// flowing while the agent is down.
func (a *Agent) Stop() {
	a.pmu.Lock()
	rs := make([]*runner, 0, len(a.plugins))
	for _, n := range a.order {
		rs = append(rs, a.plugins[n])
	}
	a.pmu.Unlock()
	for i := len(rs) - 1; i >= 0; i-- {
		rs[i].stop()
	}
}

// events handles switch events for the agent's lifetime.
func (a *Agent) events(ctx context.Context) {
	defer close(a.eventDone)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-a.sw.Events():
			if !ok {
				return
			}
			switch ev.Kind {
			case openflow.EventConnected:
				a.setOVSConnected(true)
				if ev.Reconnect {
					a.log.Warn("switch connection re-established; replaying all flows", "new_datapath", ev.NewDatapath)
					if err := a.Replay(ctx); err != nil {
						a.log.Error("replay after reconnect failed", "error", err)
					}
				}
			case openflow.EventDisconnected:
				a.setOVSConnected(false)
				a.log.Warn("switch connection lost", "error", ev.Err)
			case openflow.EventPacketIn:
				a.packetIn(ev.PacketIn)
			}
		}
	}
}

// Replays counts completed replays (for tests and introspection).
func (a *Agent) Replays() int {
	a.replayMu.Lock()
	defer a.replayMu.Unlock()
	return a.replays
}

// Replay re-installs everything the store holds (after ovs-vswitchd lost its
// flows), then clears flow-restore-wait.
func (a *Agent) Replay(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	a.mu.Lock()
	meters, msgs, err := a.allMessagesLocked()
	if err == nil {
		err = a.sendMetersLocked(ctx, meters)
	}
	if err == nil {
		err = a.sw.Bundle(ctx, msgs, false)
	}
	a.mu.Unlock()
	if err != nil {
		return fmt.Errorf("replay %d messages: %w", len(msgs), err)
	}
	if on, err := a.db.FlowRestoreWait(ctx); err == nil && on {
		if err := a.db.SetFlowRestoreWait(ctx, false); err != nil {
			return fmt.Errorf("clear flow-restore-wait: %w", err)
		}
	}
	a.replayMu.Lock()
	a.replays++
	a.replayMu.Unlock()
	a.log.Info("replayed flows", "messages", len(msgs))
	return nil
}
