package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/kube"
	"switchyard.dev/switchyard/sdk"
)

// The agent's view of its node and the cluster: the node facts it hands
// plugins (learned from the Node object through host/kube, or from the
// config in a static setup), the other nodes it fans out as node events,
// the cluster credentials plugins get, and readiness.

// nodeState is guarded by its own lock, never held across a plugin call;
// evMu serialises the fan-out of facts changes and node events, so every
// plugin sees them in the order they happened.
type nodeState struct {
	mu       sync.Mutex
	facts    sdk.NodeFacts
	known    bool
	waiting  string // why the facts are not known yet
	overhead map[string]int
	ovsDown  bool
	api      sdk.Endpoint
	ctrl     sdk.Endpoint
	token    func() (string, time.Time, error)

	evMu sync.Mutex
}

// BaseFacts are the facts that come from the config alone: name, bridge,
// datapath type and gateway.
func BaseFacts(cfg *config.Config) sdk.NodeFacts {
	n := sdk.NodeFacts{Name: cfg.NodeName, Bridge: cfg.Bridge.Name, DatapathType: cfg.Bridge.DatapathType,
		UserspaceTSO: UserspaceTSO(cfg)}
	if cfg.Node.GatewayIP != "" {
		n.GatewayIP, _ = netip.ParseAddr(cfg.Node.GatewayIP)
	}
	if cfg.Node.GatewayMAC != "" {
		n.GatewayMAC, _ = net.ParseMAC(cfg.Node.GatewayMAC)
	}
	return n
}

// NodeFacts returns the current facts (PodMTU included).
func (a *Agent) NodeFacts() sdk.NodeFacts {
	a.ns.mu.Lock()
	defer a.ns.mu.Unlock()
	return a.ns.facts
}

// podMTULocked applies the largest declared encapsulation overhead.
func (a *Agent) podMTULocked(f sdk.NodeFacts) sdk.NodeFacts {
	over := 0
	for _, o := range a.ns.overhead {
		over = max(over, o)
	}
	f.PodMTU = f.MTU - over
	return f
}

// SetNodeFacts installs new facts. The first call makes the facts known
// (plugins start after it); later ones that change anything reach every
// plugin subscribed to node facts, in config order.
func (a *Agent) SetNodeFacts(ctx context.Context, f sdk.NodeFacts) {
	a.ns.evMu.Lock()
	defer a.ns.evMu.Unlock()
	a.ns.mu.Lock()
	f = a.podMTULocked(f)
	old, first := a.ns.facts, !a.ns.known
	a.ns.facts, a.ns.known, a.ns.waiting = f, true, ""
	a.ns.mu.Unlock()
	if first {
		a.log.Info("node facts known", "pod_cidrs", f.PodCIDRs, "node_ips", f.NodeIPs, "external_ips", f.ExternalIPs,
			"uplink", f.Uplink, "mtu", f.MTU, "pod_mtu", f.PodMTU)
		return
	}
	if kube.SameFacts(old, f) {
		return
	}
	a.log.Info("node facts changed; telling the plugins", "pod_cidrs", f.PodCIDRs, "old_pod_cidrs", old.PodCIDRs,
		"node_ips", f.NodeIPs, "old_node_ips", old.NodeIPs, "mtu", f.MTU, "pod_mtu", f.PodMTU, "old_pod_mtu", old.PodMTU)
	a.factsChangedLocked(ctx, old, f)
}

// factsChangedLocked tells subscribers; a.ns.evMu must be held.
func (a *Agent) factsChangedLocked(ctx context.Context, old, f sdk.NodeFacts) {
	for _, s := range a.running(sdk.CapNodeFacts) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := s.p.NodeFactsChanged(cctx, sdk.NodeFactsChangedRequest{Old: old, New: f}); err != nil {
			a.log.Warn("node facts change not taken", "plugin", s.name, "error", err)
		}
		cancel()
	}
}

// NodeFactsProblem records why the latest view of the Node cannot be used.
// Before the facts are known it is what the agent waits for (and readiness
// names); afterwards the last good facts stay, and the datapath with them.
func (a *Agent) NodeFactsProblem(reason string) {
	a.ns.mu.Lock()
	known := a.ns.known
	changed := a.ns.waiting != reason
	if !known {
		a.ns.waiting = reason
	}
	a.ns.mu.Unlock()
	if known && changed {
		a.log.Warn("ignoring an unusable update of this node; keeping the last known node facts", "reason", reason)
	}
}

// WaitNodeFacts blocks until the facts are known, logging every few
// seconds what it waits for.
func (a *Agent) WaitNodeFacts(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	logged := ""
	for {
		a.ns.mu.Lock()
		known, why := a.ns.known, a.ns.waiting
		a.ns.mu.Unlock()
		if known {
			return nil
		}
		if why == "" {
			why = "the first answer from the apiserver"
		}
		if why != logged {
			a.log.Warn("waiting for node facts before starting plugins", "reason", why)
			logged = why
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			logged = "" // say it again every period
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// setOverhead records a plugin's declared encapsulation overhead; if it
// moves the pod MTU, every subscribed plugin hears of it.
func (a *Agent) setOverhead(ctx context.Context, plugin string, n int) {
	a.ns.evMu.Lock()
	defer a.ns.evMu.Unlock()
	a.ns.mu.Lock()
	if a.ns.overhead == nil {
		a.ns.overhead = map[string]int{}
	}
	// Every registration declares again; only a change is written (an
	// absent plugin counts as 0, and 0 is never stored).
	if a.ns.overhead[plugin] != n {
		if n == 0 {
			delete(a.ns.overhead, plugin)
		} else {
			a.ns.overhead[plugin] = n
		}
		if err := a.saveOverheadsLocked(); err != nil {
			a.log.Warn("recording the declared encapsulation overheads failed; after a restart the pod MTU may flap until the plugins are back", "error", err)
		}
	}
	old := a.ns.facts
	a.ns.facts = a.podMTULocked(old)
	f, known := a.ns.facts, a.ns.known
	a.ns.mu.Unlock()
	if !known || f.PodMTU == old.PodMTU {
		return
	}
	a.log.Info("pod MTU changed by a declared encapsulation overhead", "plugin", plugin, "overhead", n, "mtu", f.MTU, "pod_mtu", f.PodMTU, "old_pod_mtu", old.PodMTU)
	a.factsChangedLocked(ctx, old, f)
}

// ObserveNode tells every plugin subscribed to node events about a change
// of another node; NodeEvent records it for replay to later incarnations.
func (a *Agent) ObserveNode(ctx context.Context, kind sdk.NodeEventKind, info sdk.NodeInfo) {
	a.ns.evMu.Lock()
	defer a.ns.evMu.Unlock()
	a.log.Debug("node event", "kind", kind, "node", info.Name, "node_ips", info.NodeIPs, "pod_cidrs", info.PodCIDRs)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	a.NodeEvent(cctx, sdk.NodeEventRequest{Kind: kind, Node: info})
}

// SetClusterAccess says what plugins get to reach the cluster: the
// apiserver and controller endpoints, and the agent's token source.
func (a *Agent) SetClusterAccess(api, controller sdk.Endpoint, token func() (string, time.Time, error)) {
	a.ns.mu.Lock()
	defer a.ns.mu.Unlock()
	a.ns.api, a.ns.ctrl, a.ns.token = api, controller, token
}

func (a *Agent) clusterAccess() sdk.Cluster {
	a.ns.mu.Lock()
	defer a.ns.mu.Unlock()
	return sdk.Cluster{APIServer: a.ns.api, Controller: a.ns.ctrl}
}

// clusterToken is the token a plugin gets from Host.Token.
func (a *Agent) clusterToken() (string, time.Time, error) {
	a.ns.mu.Lock()
	tok := a.ns.token
	a.ns.mu.Unlock()
	if tok == nil {
		return "", time.Time{}, nil
	}
	return tok()
}

func (a *Agent) setOVSConnected(up bool) {
	a.ns.mu.Lock()
	defer a.ns.mu.Unlock()
	a.ns.ovsDown = !up
}

// NotReady lists what keeps the agent from being ready, one line each; it
// is empty when OVS is connected, the node facts are known, and every
// enabled plugin has started and said Synced.
func (a *Agent) NotReady() []string {
	var out []string
	a.ns.mu.Lock()
	if a.ns.ovsDown {
		out = append(out, "OVS: the OpenFlow connection to the bridge is down (is ovs-vswitchd running?)")
	}
	if !a.ns.known {
		why := a.ns.waiting
		if why == "" {
			why = "not learned yet"
		}
		out = append(out, "node facts: "+why)
	}
	a.ns.mu.Unlock()
	a.pmu.Lock()
	cfg := a.cfg
	rs := map[string]*runner{}
	for n, r := range a.plugins {
		rs[n] = r
	}
	a.pmu.Unlock()
	for _, p := range cfg.Plugins {
		r := rs[p.Name]
		if r == nil {
			out = append(out, fmt.Sprintf("plugin %s: not started yet", p.Name))
			continue
		}
		r.mu.Lock()
		state, lastErr := r.state, r.lastErr
		r.mu.Unlock()
		switch state {
		case StateSynced:
		case StateFailed, StateRestarting:
			out = append(out, fmt.Sprintf("plugin %s: %s (%s)", p.Name, state, lastErr))
		default:
			out = append(out, fmt.Sprintf("plugin %s: %s, not synced yet", p.Name, state))
		}
	}
	return out
}

// WaitReady waits up to bound for the agent to be ready; the error names
// what is still missing.
func (a *Agent) WaitReady(ctx context.Context, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		missing := a.NotReady()
		if len(missing) == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("switchyard agent is not ready after %s: %s", bound, strings.Join(missing, "; "))
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("switchyard agent is not ready: %s", strings.Join(missing, "; ")), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// overheadPath is where the declared encapsulation overheads outlive the
// agent process. A restarted agent starts its plugins one by one: without
// the record, the first ones would see the pod MTU without the tunnel's
// overhead, podnet would set it on the gateway and the tunnel's return
// would set it back; a port's MTU change makes ovs-vswitchd reconfigure
// its userspace datapath, and packets of running pods met meanwhile are
// dropped.
func (a *Agent) overheadPath() string { return filepath.Join(a.cfg.RunDir, "overheads.json") }

// loadOverheads reads the overheads an earlier agent process recorded,
// keeping only the plugins enabled now (a plugin no longer enabled
// declares nothing). A missing or unreadable record is an empty one: the
// plugins declare their overheads again as they register.
// saveOverheadsLocked writes the record; a.ns.mu is held.
func (a *Agent) saveOverheadsLocked() error {
	b, err := json.Marshal(a.ns.overhead)
	if err != nil {
		return err
	}
	return writeFileAtomic(a.overheadPath(), b)
}

func loadOverheads(path string, enabled []config.Plugin) map[string]int {
	b, err := os.ReadFile(path)
	if err != nil {
		return map[string]int{}
	}
	var rec map[string]int
	if json.Unmarshal(b, &rec) != nil {
		return map[string]int{}
	}
	out := map[string]int{}
	for _, p := range enabled {
		if n := rec[p.Name]; n > 0 {
			out[p.Name] = n
		}
	}
	return out
}
