package warm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"switchyard.dev/switchyard/plugins/podnet/veth"
	"switchyard.dev/switchyard/sdk"
)

// Host is what the pool needs of the plugin host.
type Host interface {
	CreatePort(ctx context.Context, req sdk.PortRequest) (sdk.Port, error)
	DeletePort(ctx context.Context, name string) error
	Port(ctx context.Context, name string) (sdk.Port, error)
}

// Options configure a pool.
type Options struct {
	// Size is how many attached pairs the pool keeps ready.
	Size int
	// Dir holds one file per pair the pool created and has not handed
	// out, so a pool opened after a crash can sweep them.
	Dir  string
	Host Host
	Log  *slog.Logger
	// MTU is the MTU new pairs get: the node's pod MTU, read on each
	// refill so a change applies to the next pair.
	MTU func() int
	// NoTxChecksum: see veth.CreateWarm.
	NoTxChecksum bool
	// Claimed reports whether a pair an earlier process created was
	// handed to a pod before the process died (Take's claim was written):
	// such a pair is the pod's and is not swept.
	Claimed func(name string) bool
	// Labeler, if the host has one, names a taken pair's pod on its OVS
	// port (Label).
	Labeler sdk.PortLabeler
}

// Port is one warm pair: Name is its host end, attached to the switch as
// OFPort; veth.LowerName(Name) its lower end.
type Port struct {
	Name          string
	OFPort        uint32
	OFPortRequest uint32
	MTU           int
}

// ExternalIDs mark the OVS port of a pair the pool made. The mark stays
// when a pod takes the pair; Label adds the pod's name.
var ExternalIDs = map[string]string{"switchyard.dev/origin": "warm-pool", sdk.ExternalIDNodeVeth: "true"}

// Pool keeps Options.Size pairs attached and refills in the background.
type Pool struct {
	o      Options
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	ready  []Port
	labels []label // for taken pairs, applied at the next quiet moment
	closed bool
}

type label struct {
	port string
	ids  map[string]string
}

// refill backoff after a failed pair: the switch or the kernel refused,
// and trying at once would only repeat the error in the log.
const (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// Open takes over the ready pairs an earlier pool left in o.Dir (a
// restarted podnet keeps its pool, so a restart changes nothing on the
// switch), removes those it cannot use, and starts filling the pool.
// Take falls back to the caller's cold path until a pair is ready.
func Open(ctx context.Context, o Options) (*Pool, error) {
	if o.Size <= 0 {
		return nil, fmt.Errorf("warm port pool size %d: it must be at least 1 (0 turns the pool off)", o.Size)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("warm port pool dir: %w", err)
	}
	ready, err := takeOver(ctx, o)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &Pool{o: o, ready: ready, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go p.refill(rctx)
	return p, nil
}

// Sweep removes every pair an earlier pool in o.Dir created and did not
// hand out: its OVS port and its veth pair. It is takeOver keeping none,
// for a pool turned off.
func Sweep(ctx context.Context, o Options) error {
	o.Size = 0
	_, err := takeOver(ctx, o)
	return err
}

// takeOver returns the pairs listed in o.Dir that are whole (both ends,
// the node's pod MTU, the host end attached) up to o.Size, and removes
// the rest, skipping those a pod claimed.
func takeOver(ctx context.Context, o Options) ([]Port, error) {
	ents, err := os.ReadDir(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("warm port pool dir: %w", err)
	}
	var ready []Port
	var errs []error
	removed := 0
	for _, e := range ents {
		name := e.Name()
		if o.Claimed(name) {
			if err := os.Remove(filepath.Join(o.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		if len(ready) < o.Size {
			if p, ok := whole(ctx, o, name); ok {
				ready = append(ready, p)
				continue
			}
		}
		if err := removePair(ctx, o.Host, name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
		if err := os.Remove(filepath.Join(o.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(ready) > 0 || removed > 0 {
		o.Log.Info("took over the warm ports an earlier podnet left", "kept", len(ready), "removed", removed)
	}
	return ready, errors.Join(errs...)
}

// whole reports whether pair name is usable as it stands.
func whole(ctx context.Context, o Options, name string) (Port, bool) {
	host, err := netlink.LinkByName(name)
	if err != nil || host.Attrs().MTU != o.MTU() {
		return Port{}, false
	}
	if lower, err := netlink.LinkByName(veth.LowerName(name)); err != nil || lower.Attrs().Flags&net.FlagUp == 0 {
		return Port{}, false
	}
	port, err := o.Host.Port(ctx, name)
	if err != nil || port.OFPort == 0 {
		return Port{}, false
	}
	return Port{Name: name, OFPort: port.OFPort, OFPortRequest: port.OFPortRequest, MTU: host.Attrs().MTU}, true
}

// removePair deletes a pair's port and veth; either may be gone already.
func removePair(ctx context.Context, h Host, name string) error {
	var errs []error
	if err := h.DeletePort(ctx, name); err != nil && !errors.Is(err, sdk.ErrNotFound) {
		errs = append(errs, fmt.Errorf("deleting warm OVS port %s: %w", name, err))
	}
	if link, err := netlink.LinkByName(name); err == nil {
		if err := netlink.LinkDel(link); err != nil {
			errs = append(errs, fmt.Errorf("deleting warm veth %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Take hands out a ready pair of the given MTU, after claim has recorded
// which pod it goes to (claim's error leaves the pair in the pool). It
// reports false when no such pair is ready; the caller then creates one
// itself. Pairs of an MTU the node no longer uses are dropped. The pool
// refills when the caller says so (Refill).
func (p *Pool) Take(mtu int, claim func(name string) error) (Port, bool, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return Port{}, false, nil
	}
	stale := p.takeStale()
	i := len(p.ready) - 1
	for ; i >= 0 && p.ready[i].MTU != mtu; i-- {
	}
	var got Port
	if i >= 0 {
		got = p.ready[i]
		p.ready = append(p.ready[:i], p.ready[i+1:]...)
	}
	p.mu.Unlock()
	if len(stale) > 0 {
		go p.drop(stale)
	}
	if i < 0 {
		return Port{}, false, nil
	}
	if err := claim(got.Name); err != nil {
		p.mu.Lock()
		p.ready = append(p.ready, got)
		p.mu.Unlock()
		return Port{}, false, err
	}
	if err := os.Remove(filepath.Join(p.o.Dir, got.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.o.Log.Warn("could not remove a handed-out warm port from the pool's list; the next start keeps it, as it is claimed", "port", got.Name, "error", err)
	}
	return got, true, nil
}

// takeStale removes the ready pairs of an MTU the node no longer uses
// from the pool and returns them. Called with p.mu held.
func (p *Pool) takeStale() []Port {
	current := p.o.MTU()
	var stale []Port
	keep := p.ready[:0]
	for _, r := range p.ready {
		if r.MTU != current {
			stale = append(stale, r)
		} else {
			keep = append(keep, r)
		}
	}
	p.ready = keep
	return stale
}

// Retune replaces the ready pairs made for an MTU the node no longer
// uses (Options.MTU changed), in the background: the caller calls it when
// the pod MTU changes, so the next ADD finds a pair of the new one.
func (p *Pool) Retune() {
	p.mu.Lock()
	var stale []Port
	if !p.closed {
		stale = p.takeStale()
	}
	p.mu.Unlock()
	if len(stale) > 0 {
		go func() {
			p.drop(stale)
			p.wake()
		}()
	}
}

// Refill asks the pool to replace the pairs taken. The caller calls it
// once its ADD no longer needs the switch: attaching a new port keeps
// ovs-vswitchd's main loop busy for milliseconds, and the ADD's own flows
// would wait behind it. The refill starts at the next quiet moment
// (refillQuiet).
func (p *Pool) Refill() { p.wake() }

// Label sets ids on a taken pair's OVS port (the pod's name, as a port
// made for the pod carries from its creation) at the next quiet moment,
// with the refill: each OVSDB change costs ovs-vswitchd a
// reconfiguration, which an ADD in flight would wait behind. A port gone
// by then (its pod deleted) is skipped.
func (p *Pool) Label(port string, ids map[string]string) {
	if p.o.Labeler == nil {
		return
	}
	p.mu.Lock()
	p.labels = append(p.labels, label{port, ids})
	p.mu.Unlock()
	p.wake()
}

func (p *Pool) applyLabels(ctx context.Context) {
	p.mu.Lock()
	pending := p.labels
	p.labels = nil
	p.mu.Unlock()
	for _, l := range pending {
		err := p.o.Labeler.LabelPort(ctx, l.port, l.ids)
		switch {
		case errors.Is(err, sdk.ErrNotFound):
			p.o.Log.Debug("a taken warm port was gone before it could be labelled", "port", l.port)
		case err != nil:
			p.o.Log.Warn("could not name the pod on its warm port in OVSDB; the agent's interface record still does", "port", l.port, "error", err)
		}
	}
}

func (p *Pool) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *Pool) drop(ports []Port) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, r := range ports {
		p.o.Log.Info("dropping a warm port made for the node's old pod MTU", "port", r.Name, "mtu", r.MTU)
		p.discard(ctx, r.Name)
	}
}

// discard removes a pair the pool made and forgets it.
func (p *Pool) discard(ctx context.Context, name string) {
	if err := removePair(ctx, p.o.Host, name); err != nil {
		p.o.Log.Warn("could not remove a warm port; the next start sweeps it", "port", name, "error", err)
		return
	}
	if err := os.Remove(filepath.Join(p.o.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.o.Log.Warn("could not remove a warm port from the pool's list", "port", name, "error", err)
	}
}

// Close stops the refill. With remove (the plugin is unloaded, or the
// pool turned off) it removes every pair not handed out; without, they
// stay for the next podnet to take over (Open), as the SDK asks of a
// plugin that stops to restart.
func (p *Pool) Close(ctx context.Context, remove bool) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	<-p.done
	if !remove {
		return nil
	}
	p.mu.Lock()
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	var errs []error
	for _, r := range ready {
		if err := removePair(ctx, p.o.Host, r.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(filepath.Join(p.o.Dir, r.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *Pool) missing() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0
	}
	return p.o.Size - len(p.ready)
}

func (p *Pool) refill(ctx context.Context) {
	defer close(p.done)
	backoff := minBackoff
	for {
		p.applyLabels(ctx)
		for p.missing() > 0 && ctx.Err() == nil {
			port, err := p.fill(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				p.o.Log.Warn("could not add a warm port; ADDs create their own meanwhile", "error", err, "retry_in", backoff)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
					return
				}
				backoff = min(2*backoff, maxBackoff)
				continue
			}
			backoff = minBackoff
			p.mu.Lock()
			closed := p.closed
			if !closed {
				p.ready = append(p.ready, port)
			}
			p.mu.Unlock()
			if closed {
				p.discard(context.WithoutCancel(ctx), port.Name)
			}
		}
		select {
		case <-p.kick:
		case <-ctx.Done():
			return
		}
		if !p.quiet(ctx) {
			return
		}
	}
}

// Refill waits for a quiet moment: the ADD that took a pair still has its
// result to record and return when podnet is done with it, and on a small
// node creating and attaching the next pair would compete with that for
// CPU. It waits until no ADD asked for refillQuiet, or refillMaxDelay
// passed, so a steady stream of ADDs still gets its pairs back.
const (
	refillQuiet    = 25 * time.Millisecond
	refillMaxDelay = 100 * time.Millisecond
)

// quiet waits as Refill's comment says; false means the pool is closing.
func (p *Pool) quiet(ctx context.Context) bool {
	limit := time.NewTimer(refillMaxDelay)
	defer limit.Stop()
	for {
		select {
		case <-p.kick:
		case <-time.After(refillQuiet):
			return true
		case <-limit.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// fill creates one pair and waits until the switch has attached its
// host end. On error nothing of it is left.
func (p *Pool) fill(ctx context.Context) (Port, error) {
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Port{}, err
	}
	name := "syw" + hex.EncodeToString(b[:])
	marker := filepath.Join(p.o.Dir, name)
	// Written first: a crash from here on leaves a port the next Open
	// sweeps.
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return Port{}, fmt.Errorf("recording warm port %s: %w", name, err)
	}
	mtu := p.o.MTU()
	if err := veth.CreateWarm(name, mtu, p.o.NoTxChecksum); err != nil {
		os.Remove(marker)
		return Port{}, err
	}
	port, err := p.o.Host.CreatePort(ctx, sdk.PortRequest{Name: name, ExternalIDs: ExternalIDs})
	if err != nil {
		p.discard(context.WithoutCancel(ctx), name)
		return Port{}, fmt.Errorf("attaching warm port %s: %w", name, err)
	}
	return Port{Name: name, OFPort: port.OFPort, OFPortRequest: port.OFPortRequest, MTU: mtu}, nil
}
