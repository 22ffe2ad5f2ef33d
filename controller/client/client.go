package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
)

// Handler receives the node's span. Its methods are called one at a time,
// from Run's goroutine, and must not keep s past the call except through
// Client.View.
type Handler interface {
	// Replace hands over a complete span after a (re)snapshot. The previous
	// state stayed current until this call, so a consumer enforces either
	// the old or the new span, never half of one.
	Replace(s *State)
	// Apply hands over one incremental change, already applied to s.
	Apply(s *State, c Change)
}

// StreamObserver is an optional Handler extension told when the stream goes
// up (synced with the controller) or down (err says why).
type StreamObserver interface {
	StreamChanged(up bool, err error)
}

// EventObserver is an optional Handler extension that sees every event as
// it arrives, before it is applied (protocol tests, debugging, lag metrics).
type EventObserver interface {
	Event(ev *apiv1.WatchEvent)
}

// Config configures a Client.
type Config struct {
	// Address is the controller's distribution API, host:port.
	Address string
	// NodeName is the node whose span is watched; it must match the node
	// name claim of the token.
	NodeName string
	// TLS secures the connection; nil dials in plaintext (loopback tests).
	TLS *tls.Config
	// Token returns the bearer token for each (re)connect, so a rotated
	// token is picked up; nil sends none.
	Token func(ctx context.Context) (string, error)
	// Handler receives the span. Required.
	Handler Handler
	// Initial is a state to start from (Load), used until the controller
	// answers and offered to it as the resume position.
	Initial *State
	// MinBackoff and MaxBackoff bound the reconnect delay (defaults 100 ms
	// and 5 s); the delay doubles per failed attempt, with jitter.
	MinBackoff, MaxBackoff time.Duration
	Log                    *slog.Logger
	// DialOptions are added to the gRPC dial (tests).
	DialOptions []grpc.DialOption
	// Discovery, when set, finds the controller's endpoints and CA through
	// the apiserver instead of DNS (Address names its Service).
	Discovery *ServiceDiscovery
}

// Client watches one node's span. Create it with New and run it with Run.
type Client struct {
	cfg  Config
	log  *slog.Logger
	conn *grpc.ClientConn

	mu     sync.Mutex
	state  *State // current, complete span
	synced bool   // the stream is caught up with the controller
}

// New validates cfg and prepares the connection; it does no I/O.
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.Address == "":
		return nil, errors.New("controller client: no controller address: set the controller's host:port")
	case cfg.NodeName == "":
		return nil, errors.New("controller client: no node name: set the node this agent runs on")
	case cfg.Handler == nil:
		return nil, errors.New("controller client: no Handler")
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = 5 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	creds := insecure.NewCredentials()
	target := cfg.Address
	var opts []grpc.DialOption
	if d := cfg.Discovery; d != nil {
		// passthrough: the dialer resolves the Service, not gRPC's DNS.
		target = "passthrough:///" + cfg.Address
		opts = append(opts, grpc.WithContextDialer(d.Dial))
		if cfg.TLS != nil {
			cfg.TLS = d.TLSConfig(cfg.TLS)
		}
	}
	if cfg.TLS != nil {
		creds = credentials.NewTLS(cfg.TLS)
	}
	opts = append(append(opts, grpc.WithTransportCredentials(creds)), cfg.DialOptions...)
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("controller client: address %q: %w", cfg.Address, err)
	}
	st := cfg.Initial
	if st == nil {
		st = NewState()
	}
	return &Client{cfg: cfg, log: log.With("node", cfg.NodeName, "controller", cfg.Address), conn: conn, state: st}, nil
}

// Close releases the connection; call it after Run returned.
func (c *Client) Close() error { return c.conn.Close() }

// View calls fn with the current span under the client's lock.
func (c *Client) View(fn func(*State)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(c.state)
}

// Synced reports whether the stream is up and the span complete.
func (c *Client) Synced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

// Run watches until ctx ends, reconnecting after every failure, and returns
// ctx's error. Refusals are retried too: a renewed token or a Node that
// appears later can fix them, and the last known span stays in force
// meanwhile.
func (c *Client) Run(ctx context.Context) error {
	backoff := c.cfg.MinBackoff
	for {
		start := time.Now()
		err := c.watchOnce(ctx)
		c.setSynced(false, err)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(start) > 10*c.cfg.MaxBackoff {
			backoff = c.cfg.MinBackoff // it was up for a while: start over
		}
		c.log.Warn("policy stream broken; keeping the last known policies and reconnecting", "err", err, "retryIn", backoff)
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(2*backoff, c.cfg.MaxBackoff)
	}
}

func (c *Client) setSynced(up bool, err error) {
	c.mu.Lock()
	changed := c.synced != up
	c.synced = up
	c.mu.Unlock()
	if o, ok := c.cfg.Handler.(StreamObserver); ok && changed {
		o.StreamChanged(up, err)
	}
}

// watchOnce runs one stream until it fails.
func (c *Client) watchOnce(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.cfg.Token != nil {
		tok, err := c.cfg.Token(ctx)
		if err != nil {
			return fmt.Errorf("getting a token for the controller: %w", err)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	req := &apiv1.WatchRequest{NodeName: c.cfg.NodeName}
	c.mu.Lock()
	if c.state.Epoch != "" {
		req.ResumeEpoch, req.ResumeVersion = c.state.Epoch, c.state.Version
	}
	c.mu.Unlock()
	stream, err := apiv1.NewPolicyDistributionClient(c.conn).Watch(ctx, req)
	if err != nil {
		return explain(err)
	}
	var pending *State // a snapshot being received
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("the controller ended the stream")
			}
			return explain(err)
		}
		pending = c.handle(ev, pending)
	}
}

// handle applies one event and returns the snapshot in progress, if any.
func (c *Client) handle(ev *apiv1.WatchEvent, pending *State) *State {
	if o, ok := c.cfg.Handler.(EventObserver); ok {
		o.Event(ev)
	}
	switch x := ev.Event.(type) {
	case *apiv1.WatchEvent_Reset_:
		c.log.Info("policy snapshot starting", "epoch", ev.Epoch, "version", ev.Version, "reason", x.Reset_.Reason)
		c.setSynced(false, nil)
		return NewState()
	case *apiv1.WatchEvent_Resumed:
		c.log.Info("policy stream resumed", "epoch", ev.Epoch, "fromVersion", ev.Version)
		return nil
	case *apiv1.WatchEvent_Synced:
		if pending != nil {
			pending.Epoch, pending.Version = ev.Epoch, ev.Version
			c.mu.Lock()
			c.state = pending
			c.mu.Unlock()
			c.log.Info("policy snapshot complete", "policies", len(pending.Policies),
				"appliedToGroups", len(pending.AppliedToGroups), "addressGroups", len(pending.AddressGroups))
			c.cfg.Handler.Replace(pending)
		}
		c.setSynced(true, nil)
		return nil
	}
	if pending != nil {
		pending.apply(ev)
		return pending
	}
	c.mu.Lock()
	ch, ok := c.state.apply(ev)
	c.state.Epoch, c.state.Version = ev.Epoch, ev.Version
	st := c.state
	c.mu.Unlock()
	if ok {
		c.cfg.Handler.Apply(st, ch)
	}
	return nil
}

// explain turns the controller's refusals into errors that say what to do.
func explain(err error) error {
	switch status.Code(err) {
	case codes.Unauthenticated:
		return fmt.Errorf("the controller refused the token (is it a pod-bound ServiceAccount token of the agent?): %w", err)
	case codes.PermissionDenied:
		return fmt.Errorf("the controller refused this node (does the token's pod run on this node, and is its ServiceAccount allowed?): %w", err)
	case codes.Unavailable:
		return fmt.Errorf("the controller is unreachable: %w", err)
	}
	return err
}

// Report tells the controller which policy generations this node realized.
func (c *Client) Report(ctx context.Context, realized map[string]int64) error {
	if c.cfg.Token != nil {
		tok, err := c.cfg.Token(ctx)
		if err != nil {
			return fmt.Errorf("getting a token for the controller: %w", err)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	req := &apiv1.RealizationReport{NodeName: c.cfg.NodeName}
	for uid, gen := range realized {
		req.Policies = append(req.Policies, &apiv1.Realized{Uid: uid, Generation: gen})
	}
	_, err := apiv1.NewPolicyDistributionClient(c.conn).ReportRealization(ctx, req)
	return explain(err)
}
