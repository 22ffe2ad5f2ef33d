package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/sdkhost"
)

// Plugin states as the introspection API reports them.
const (
	StateStarting   = "starting" // launched; its Start has not returned yet
	StateRunning    = "running"  // Start returned, not yet synced
	StateSynced     = "synced"
	StateRestarting = "restarting"
	StateFailed     = "failed" // will not be retried until the config changes
	StateStopped    = "stopped"
	// StateUnloading: disabled by a reload; its flows, ports and tables are
	// being removed. The plugin leaves the list only when they are gone.
	StateUnloading = "unloading"
)

// runner supervises one plugin process across restarts.
type runner struct {
	a    *Agent
	spec config.Plugin
	lim  config.Limits
	log  *slog.Logger

	limiter *bucket
	pktin   chan sdk.PacketInRequest

	mu    sync.Mutex
	state string
	// unloading: the plugin is being disabled for good (runner.unload).
	unloading  bool
	version    string
	apiVersion int
	pid        int
	restarts   int
	lastErr    string
	caps       []sdk.Capability
	proc       *sdkhost.Plugin
	synced     chan struct{} // closed on each incarnation's Synced
	// started is set once the current incarnation's Start returned and it
	// was given the current pods and nodes; only then do calls and events
	// reach it.
	started   bool
	startedAt time.Time     // when the current incarnation's Start was called
	syncTook  time.Duration // Start call to Synced, last incarnation

	// binHash is the SHA-256 of the plugin binary when it was started, so
	// a reload notices a rebuilt binary at the same path.
	binHash string

	cancel context.CancelFunc
	done   chan struct{}
}

func (r *runner) set(f func(r *runner)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// startPlugin launches a plugin and waits for its first start attempt, so
// plugins start (and get table IDs) in config order.
func (a *Agent) startPlugin(ctx context.Context, spec config.Plugin, lim config.Limits) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &runner{a: a, spec: spec, lim: lim, log: a.log.With("plugin", spec.Name),
		limiter: newBucket(lim.RequestsPerSecond, lim.Burst), pktin: make(chan sdk.PacketInRequest, 256),
		state: StateStarting, cancel: cancel, done: make(chan struct{}), synced: make(chan struct{}),
		binHash: fileHash(spec.Path)}
	a.pmu.Lock()
	a.plugins[spec.Name] = r
	if !slices.Contains(a.order, spec.Name) {
		a.order = append(a.order, spec.Name)
	}
	a.pmu.Unlock()
	first := make(chan struct{})
	go r.run(ctx, first)
	go r.deliverPacketIns(ctx)
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		r.log.Warn("plugin is slow to start; starting the next ones anyway")
	}
}

// stop ends the plugin process (flows stay).
func (r *runner) stop() {
	r.cancel()
	<-r.done
	r.set(func(r *runner) { r.state = StateStopped })
}

// unload ends the plugin process telling it that it is disabled for good
// (sdk.StopRequest.Unload), so it removes what it made outside the switch.
func (r *runner) unload() {
	r.set(func(r *runner) { r.unloading = true })
	r.cancel()
	<-r.done
	r.set(func(r *runner) { r.state = StateStopped })
}

const (
	// The first restart after a healthy run is immediate: the flows stay
	// installed, but the plugin cannot react to anything until it is back.
	// Only a plugin that keeps failing waits, from backoffMin up.
	backoffMin = 200 * time.Millisecond
	backoffMax = 10 * time.Second
	// A run this long resets the backoff: the plugin was healthy.
	healthyRun = 30 * time.Second
	exitPoll   = 25 * time.Millisecond
)

func (r *runner) run(ctx context.Context, first chan struct{}) {
	defer close(r.done)
	once := sync.OnceFunc(func() { close(first) })
	defer once()
	var backoff time.Duration
	for {
		began := time.Now()
		err := r.incarnation(ctx, once)
		// A failed first attempt counts as one: the next plugins in config
		// order do not wait for this one's restarts.
		once()
		if ctx.Err() != nil {
			return
		}
		var permanent *permanentError
		if errors.As(err, &permanent) {
			r.log.Error("plugin cannot run; fix the plugin or config and reload (SIGHUP)", "error", err)
			r.set(func(r *runner) { r.state, r.lastErr = StateFailed, err.Error() })
			return
		}
		if time.Since(began) > healthyRun {
			backoff = 0
		}
		r.log.Warn("plugin stopped; restarting it, its flows stay installed", "error", err, "backoff", backoff)
		r.set(func(r *runner) {
			r.state, r.restarts = StateRestarting, r.restarts+1
			if err != nil {
				r.lastErr = err.Error()
			}
		})
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(max(2*backoff, backoffMin), backoffMax)
	}
}

// permanentError is a start failure a restart cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// incarnation runs one plugin process until it dies or ctx ends.
func (r *runner) incarnation(ctx context.Context, started func()) error {
	p, err := sdkhost.Launch(sdkhost.Config{Name: r.spec.Name, Path: r.spec.Path, Args: r.spec.Args, Logger: r.a.log})
	if err != nil {
		if errors.Is(err, sdkhost.ErrUnsupportedVersion) {
			return &permanentError{err}
		}
		return err
	}
	defer p.Kill()
	r.set(func(r *runner) { r.proc, r.pid, r.apiVersion, r.started = p, p.Pid(), p.Version(), false })
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	desc, caps, err := p.DescribeWith(callCtx, sdk.DescribeRequest{Config: r.spec.Config})
	if err != nil {
		if ctx.Err() == nil && p.Ping() == nil {
			// It is alive and answered: its description is wrong, and a
			// restart would describe it the same way.
			return &permanentError{fmt.Errorf("%w (the plugin answered, so a restart would not help: fix the plugin or its config, then reload)", err)}
		}
		return fmt.Errorf("describe: %w", err)
	}
	if desc.Name != r.spec.Name {
		return &permanentError{fmt.Errorf("plugin at %s calls itself %q but is enabled as %q; the names must match", r.spec.Path, desc.Name, r.spec.Name)}
	}
	if slices.Contains(caps, sdk.CapCNI) {
		if other := r.a.cniClaimedBy(r.spec.Name); other != "" {
			return &permanentError{fmt.Errorf("plugin %q handles CNI, but plugin %q already does on this node; a node has one CNI plugin: disable one of them", r.spec.Name, other)}
		}
	}
	r.a.setOverhead(ctx, r.spec.Name, desc.EncapOverhead)
	r.a.lay.Lock()
	_, err = r.a.registerLocked(callCtx, r.spec.Name, desc)
	asg, _ := r.a.arb.Assignment(r.spec.Name)
	r.a.lay.Unlock()
	if err != nil {
		return &permanentError{err}
	}
	synced := make(chan struct{})
	r.set(func(r *runner) {
		r.version, r.caps, r.state, r.synced = desc.Version, caps, StateStarting, synced
	})
	r.log.Info("plugin registered", "version", desc.Version, "api_version", p.Version(), "pid", p.Pid(),
		"round", asg.Round, "cookie_prefix", asg.CookiePrefix, "tables", asg.Tables)
	svc := &service{a: r.a, r: r}
	r.set(func(r *runner) { r.startedAt = time.Now() })
	if err := p.Start(callCtx, sdkhost.StartArgs{Assignment: asg, Node: r.a.NodeFacts(), Config: r.spec.Config, Service: svc,
		Cluster: r.a.clusterAccess(), Attachments: r.a.attachmentsFor(caps)}); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	r.a.admit(callCtx, r, p, caps)
	started()
	return r.watch(ctx, p)
}

// watch health-checks the process until it fails or ctx ends.
func (r *runner) watch(ctx context.Context, p *sdkhost.Plugin) error {
	r.a.pmu.Lock()
	interval := r.a.cfg.HealthInterval
	r.a.pmu.Unlock()
	t := time.NewTicker(interval)
	defer t.Stop()
	// A dead process is noticed at once rather than at the next ping: the
	// restart (and the plugin's resync) starts that much sooner. The
	// kernel says when it exits (a pidfd); without one, go-plugin's Exited
	// flag (set when the process is reaped) is polled every exitPoll.
	exited, release, ok := processExit(p.Pid())
	var exitTick <-chan time.Time
	if ok {
		defer release()
	} else {
		exit := time.NewTicker(exitPoll)
		defer exit.Stop()
		exitTick = exit.C
	}
	fails := 0
	for {
		select {
		case <-ctx.Done():
			stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r.mu.Lock()
			unload := r.unloading
			r.mu.Unlock()
			if err := p.Stop(stopCtx, unload); err != nil {
				r.log.Debug("plugin stop hook", "error", err)
			}
			cancel()
			return ctx.Err()
		case <-exited:
			// go-plugin reaps the process and sets its flag a moment
			// later; the flag is what the restart relies on.
			exited = nil
			if waitExited(p, time.Second) {
				return errors.New("plugin process exited")
			}
			continue
		case <-exitTick:
			if p.Exited() {
				return errors.New("plugin process exited")
			}
			continue
		case <-t.C:
		}
		if p.Exited() {
			return errors.New("plugin process exited")
		}
		if err := p.Ping(); err != nil {
			fails++
			if fails >= 3 {
				return fmt.Errorf("plugin failed 3 health checks: %w", err)
			}
			continue
		}
		fails = 0
	}
}

// waitExited waits up to d for go-plugin to see the process gone.
func waitExited(p *sdkhost.Plugin, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !p.Exited() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// cniClaimedBy names another enabled plugin that declared the CNI
// capability, or "".
func (a *Agent) cniClaimedBy(name string) string {
	a.pmu.Lock()
	order := slices.Clone(a.order)
	rs := maps.Clone(a.plugins)
	a.pmu.Unlock()
	for _, n := range order {
		r := rs[n]
		if r == nil || n == name {
			continue
		}
		r.mu.Lock()
		claims := slices.Contains(r.caps, sdk.CapCNI) && r.state != StateFailed
		r.mu.Unlock()
		if claims {
			return n
		}
	}
	return ""
}

// markSynced is called when the current incarnation says it is synced.
func (r *runner) markSynced() {
	r.set(func(r *runner) {
		r.state = StateSynced
		r.syncTook = time.Since(r.startedAt)
		select {
		case <-r.synced:
		default:
			close(r.synced)
		}
	})
}

// deliverPacketIns hands packet-ins to the plugin one at a time.
func (r *runner) deliverPacketIns(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case pi := <-r.pktin:
			r.mu.Lock()
			p, started := r.proc, r.started
			r.mu.Unlock()
			if p == nil || !started {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := p.PacketIn(cctx, pi); err != nil {
				r.log.Debug("packet-in delivery failed", "table", pi.Table, "error", err)
			}
			cancel()
		}
	}
}

// WaitSynced waits until the named plugin's current incarnation is synced.
func (a *Agent) WaitSynced(ctx context.Context, name string) error {
	for {
		a.pmu.Lock()
		r := a.plugins[name]
		a.pmu.Unlock()
		if r == nil {
			return fmt.Errorf("plugin %q is not enabled", name)
		}
		r.mu.Lock()
		ch, state, lastErr := r.synced, r.state, r.lastErr
		r.mu.Unlock()
		if state == StateFailed {
			return fmt.Errorf("plugin %q failed: %s", name, lastErr)
		}
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("waiting for plugin %q to sync (state %s): %w", name, state, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Reload applies a new config: plugins no longer listed are unloaded (their
// flows, ports and tables removed; listed as unloading until then), new
// ones are started in config order, and changed ones (path, args, config,
// limits, or a rebuilt binary at the same path) are restarted, keeping
// their flows until the new incarnation syncs.
func (a *Agent) Reload(ctx context.Context, cfg *config.Config) {
	a.pmu.Lock()
	old := a.cfg
	a.cfg = cfg
	a.pmu.Unlock()
	want := map[string]config.Plugin{}
	for _, p := range cfg.Plugins {
		want[p.Name] = p
	}
	for _, p := range old.Plugins {
		np, keep := want[p.Name]
		a.pmu.Lock()
		r := a.plugins[p.Name]
		a.pmu.Unlock()
		rebuilt := r != nil && r.binHash != fileHash(np.Path)
		if keep && samePlugin(p, np) && old.EffectiveLimits(p) == cfg.EffectiveLimits(np) && !rebuilt {
			continue
		}
		if !keep {
			// Listed as unloading until everything of it is gone.
			a.log.Info("plugin disabled by config reload; unloading", "plugin", p.Name)
			a.setOverhead(ctx, p.Name, 0)
			if r != nil {
				r.unload()
				r.set(func(r *runner) { r.state = StateUnloading })
			}
			a.removePlugin(ctx, p.Name)
		} else if rebuilt {
			a.log.Info("plugin binary changed; restarting it on the new build", "plugin", p.Name, "path", np.Path)
		} else {
			a.log.Info("plugin changed in config reload; restarting", "plugin", p.Name)
		}
		a.pmu.Lock()
		delete(a.plugins, p.Name)
		a.order = slices.DeleteFunc(a.order, func(n string) bool { return n == p.Name })
		a.pmu.Unlock()
		if keep && r != nil {
			r.stop()
		}
	}
	for _, p := range cfg.Plugins {
		a.pmu.Lock()
		_, running := a.plugins[p.Name]
		a.pmu.Unlock()
		if !running {
			a.startPlugin(ctx, p, cfg.EffectiveLimits(p))
		}
	}
}

// fileHash is the hex SHA-256 of a file, "" if it cannot be read (then a
// reload compares "" with the hash taken at start and restarts the plugin
// if that differs, which surfaces the read error at its next launch).
func fileHash(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

func samePlugin(a, b config.Plugin) bool {
	return a.Path == b.Path && slices.Equal(a.Args, b.Args) && string(a.Config) == string(b.Config)
}
