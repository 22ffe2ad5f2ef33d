package openflow

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Conn. The zero value is usable.
type Options struct {
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
	// EchoInterval is how often the connection is probed with an echo
	// request; a probe unanswered for another interval drops the
	// connection, which is then re-established. Default 5s.
	EchoInterval time.Duration
	// ReconnectMin/Max bound the exponential reconnect backoff.
	// Defaults 100ms and 5s.
	ReconnectMin, ReconnectMax time.Duration
	// BundleLimit is the largest number of messages put in one bundle of
	// a non-atomic batch; larger batches are split into several bundles,
	// committed in order, so the switch never holds more than this many
	// uncommitted flows for us. An atomic batch is one bundle whatever its
	// size (OVS 3.1 takes 100,000 flow mods in one bundle; see the
	// itest/openflow benchmark). Default 50000.
	BundleLimit int
	// AsyncEvents asks for packet-ins as NXT_PACKET_IN2 (the only format
	// that carries controller(userdata=...) and pause continuations) and
	// enables, with SET_ASYNC, packet-ins of every reason, port status and
	// flow-removed messages for timeouts.
	// (OVS 3.1 already sends plain OF1.5 packet-ins and port status on the
	// bridge's .mgmt socket without SET_ASYNC, checked in itest/openflow;
	// AsyncEvents makes the configuration explicit and version-proof.)
	AsyncEvents bool
	// NoAsync turns every asynchronous message off (SET_ASYNC with empty
	// masks), for a connection that only sends batches: the switch then
	// does not copy packet-ins and port status to it.
	NoAsync bool
	// ControllerID, when non-zero, is sent with NXT_SET_CONTROLLER_ID so
	// controller(id=N) actions reach this connection.
	ControllerID uint16
	// EventBuffer is the capacity of the Events channel. Default 1024.
	EventBuffer int
}

// EventKind says what an Event reports.
type EventKind int

const (
	// EventConnected: the connection (re-)established. Reconnect is true
	// after the first time; the switch may have restarted and lost its
	// flows, so the owner should replay them.
	EventConnected EventKind = iota + 1
	// EventDisconnected: the connection was lost; Err says why.
	EventDisconnected
	// EventPacketIn: PacketIn holds a packet sent to the controller.
	EventPacketIn
	// EventPortStatus: PortStatus holds a port change.
	EventPortStatus
	// EventFlowRemoved: FlowRemoved holds a flow the switch removed (only
	// flows installed with FlagSendFlowRem are reported).
	EventFlowRemoved
)

// Event is delivered on Conn.Events.
type Event struct {
	Kind       EventKind
	DatapathID uint64
	// Reconnect is set on EventConnected after the first connection.
	Reconnect bool
	// NewDatapath is set when the datapath ID differs from the previous
	// connection's: a different switch or a re-created bridge.
	NewDatapath bool
	Err         error
	PacketIn    *PacketIn
	PortStatus  *PortStatus
	FlowRemoved *FlowRemoved
}

// Conn is a connection to one OpenFlow switch (one OVS bridge). It
// reconnects by itself; requests wait for a live connection (bounded by
// their context). All methods are safe for concurrent use.
type Conn struct {
	network, addr string
	opts          Options
	log           *slog.Logger
	events        chan Event
	xid           atomic.Uint32

	mu       sync.Mutex
	cur      *session
	ready    chan struct{} // closed while cur != nil
	closed   bool
	dpid     uint64
	features FeaturesReply

	stop chan struct{}
	done chan struct{}
}

// Dial connects to the switch at addr ("unix" socket path such as
// /run/openvswitch/br-int.mgmt, or "tcp" host:port), negotiates OpenFlow
// 1.5 and returns once the first connection is up or ctx expires.
func Dial(ctx context.Context, network, addr string, opts Options) (*Conn, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.EchoInterval <= 0 {
		opts.EchoInterval = 5 * time.Second
	}
	if opts.ReconnectMin <= 0 {
		opts.ReconnectMin = 100 * time.Millisecond
	}
	if opts.ReconnectMax <= 0 {
		opts.ReconnectMax = 5 * time.Second
	}
	if opts.BundleLimit <= 0 {
		opts.BundleLimit = 50000
	}
	if opts.EventBuffer <= 0 {
		opts.EventBuffer = 1024
	}
	c := &Conn{network: network, addr: addr, opts: opts,
		log:    opts.Logger.With("component", "openflow", "switch", addr),
		events: make(chan Event, opts.EventBuffer), ready: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	s, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	c.install(s, false)
	go c.supervise(s)
	return c, nil
}

// Events delivers connection changes, packet-ins and port status. The
// owner must drain it: packet-ins and port status are dropped (and
// logged) when it is full, and connection events wait for room.
func (c *Conn) Events() <-chan Event { return c.events }

// DatapathID is the datapath ID learnt at the last handshake.
func (c *Conn) DatapathID() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dpid
}

// Features is the FEATURES_REPLY of the last handshake.
func (c *Conn) Features() FeaturesReply {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.features
}

// Close closes the connection and stops reconnecting. Outstanding
// requests fail with ErrClosed.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	s := c.cur
	c.mu.Unlock()
	close(c.stop)
	if s != nil {
		s.close(ErrClosed)
	}
	<-c.done
	return nil
}

func (c *Conn) nextXids(n int) uint32 {
	x := c.xid.Add(uint32(n)) - uint32(n) + 1
	if x == 0 || x+uint32(n) < x { // skip xid 0 and wrap-around
		x = c.xid.Add(uint32(n)) - uint32(n) + 1
	}
	return x
}

func (c *Conn) install(s *session, reconnect bool) {
	c.mu.Lock()
	prev := c.dpid
	c.cur = s
	c.dpid = s.features.DatapathID
	c.features = s.features
	close(c.ready)
	c.mu.Unlock()
	c.log.Info("connected to switch", "datapath_id", fmt.Sprintf("%016x", s.features.DatapathID), "reconnect", reconnect)
	c.emit(Event{Kind: EventConnected, DatapathID: s.features.DatapathID, Reconnect: reconnect,
		NewDatapath: reconnect && prev != s.features.DatapathID})
}

func (c *Conn) emit(ev Event) {
	if ev.Kind == EventPacketIn || ev.Kind == EventPortStatus || ev.Kind == EventFlowRemoved {
		// Called from the reader goroutine: never block it.
		select {
		case c.events <- ev:
		default:
			c.log.Warn("dropping async message: Events channel full; drain Conn.Events", "kind", ev.Kind)
		}
		return
	}
	select {
	case c.events <- ev:
	case <-c.stop:
	}
}

// supervise waits for the session to end, then reconnects with backoff.
func (c *Conn) supervise(s *session) {
	defer close(c.done)
	defer close(c.events)
	for {
		select {
		case <-s.dead:
		case <-c.stop:
			s.close(ErrClosed)
		}
		// The reader may still be emitting; Events must outlive it.
		<-s.readDone
		c.mu.Lock()
		c.cur = nil
		c.ready = make(chan struct{})
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return
		}
		select {
		case <-c.stop:
			return
		default:
		}
		c.log.Warn("switch connection lost", "err", s.err)
		c.emit(Event{Kind: EventDisconnected, DatapathID: s.features.DatapathID, Err: s.err})
		backoff := c.opts.ReconnectMin
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ns, err := c.connect(ctx)
			cancel()
			if err == nil {
				s = ns
				c.install(s, true)
				break
			}
			c.log.Debug("reconnect failed", "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-c.stop:
				return
			}
			backoff = min(backoff*2, c.opts.ReconnectMax)
		}
	}
}

// session is one TCP/unix connection with its reader goroutine.
type session struct {
	c        *Conn
	nc       net.Conn
	features FeaturesReply

	wmu  sync.Mutex
	w    *bufio.Writer
	wbuf []byte

	pmu     sync.Mutex
	pending map[uint32]*pending
	bundles []*bundleState

	lastRx   atomic.Int64
	dead     chan struct{}
	readDone chan struct{} // closed when readLoop returns; it may emit until then
	once     sync.Once
	err      error
}

type pending struct {
	ch    chan struct{}
	msg   Message
	parts []Message
	err   error
	req   Message
}

// bundleState collects errors for a contiguous range of xids.
type bundleState struct {
	first, last uint32
	errs        []*SwitchError
}

func (c *Conn) connect(ctx context.Context) (*session, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, c.network, c.addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to switch %s: %w", c.addr, err)
	}
	s := &session{c: c, nc: nc, w: bufio.NewWriterSize(nc, 256<<10), pending: map[uint32]*pending{}, dead: make(chan struct{}), readDone: make(chan struct{})}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	br := bufio.NewReaderSize(nc, 256<<10)
	if err := s.handshake(br); err != nil {
		nc.Close()
		return nil, fmt.Errorf("OpenFlow handshake with %s: %w", c.addr, err)
	}
	nc.SetDeadline(time.Time{})
	s.lastRx.Store(time.Now().UnixNano())
	go s.readLoop(br)
	go s.keepalive()
	// Post-handshake configuration goes through the normal request path
	// so switch errors are reported.
	if err := s.configure(ctx); err != nil {
		s.close(err)
		<-s.readDone
		return nil, fmt.Errorf("configuring switch connection %s: %w", c.addr, err)
	}
	return s, nil
}

// handshake exchanges HELLO and FEATURES synchronously, before the
// reader goroutine starts; r is then handed to the reader, so messages
// the switch sends right after FEATURES_REPLY are not lost.
func (s *session) handshake(r *bufio.Reader) error {
	b, _ := AppendMessage(nil, 0, &Hello{})
	b, _ = AppendMessage(b, 1, &FeaturesRequest{})
	if _, err := s.nc.Write(b); err != nil {
		return err
	}
	for {
		raw, err := readRaw(r)
		if err != nil {
			return err
		}
		h, m, _, err := DecodeMessage(raw)
		if err != nil {
			if h.Type == typeHello {
				return fmt.Errorf("switch hello: %w", err)
			}
			continue
		}
		switch m := m.(type) {
		case *Hello:
			if h.Version < Version || (m.Versions != 0 && m.Versions&(1<<Version) == 0) {
				return fmt.Errorf("switch does not speak OpenFlow 1.5 (hello version %#x, bitmap %#x): add OpenFlow15 to the bridge's protocols", h.Version, m.Versions)
			}
		case *ErrorMsg:
			return &SwitchError{Code: m.Code, Xid: h.Xid, Data: m.Data, Index: -1}
		case *EchoRequest:
			rep, _ := AppendMessage(nil, h.Xid, &EchoReply{Data: m.Data})
			s.nc.Write(rep)
		case *FeaturesReply:
			s.features = *m
			return nil
		}
	}
}

func (s *session) configure(ctx context.Context) error {
	c := s.c
	var msgs []Message
	msgs = append(msgs, &SetConfig{SwitchConfig{MissSendLen: 0xffff}})
	if c.opts.ControllerID != 0 {
		msgs = append(msgs, &SetControllerID{ID: c.opts.ControllerID})
	}
	if c.opts.AsyncEvents {
		msgs = append(msgs, &SetPacketInFormat{Format: PacketInNX2},
			&SetAsync{Props: []AsyncProp{
				{Type: AsyncPacketInMaster, Mask: 0x3f}, {Type: AsyncPacketInSlave, Mask: 0x3f},
				{Type: AsyncPortStatusMaster, Mask: 0x7}, {Type: AsyncPortStatusSlave, Mask: 0x7},
				// Flow removed for idle and hard timeouts only: deletes are
				// ours, and the flow store already knows about them.
				{Type: AsyncFlowRemMaster, Mask: 1<<RemovedIdleTimeout | 1<<RemovedHardTimeout},
				{Type: AsyncFlowRemSlave, Mask: 1<<RemovedIdleTimeout | 1<<RemovedHardTimeout},
			}})
	}
	if c.opts.NoAsync {
		var props []AsyncProp
		for _, t := range []uint16{AsyncPacketInSlave, AsyncPacketInMaster, AsyncPortStatusSlave, AsyncPortStatusMaster, AsyncFlowRemSlave, AsyncFlowRemMaster} {
			props = append(props, AsyncProp{Type: t})
		}
		msgs = append(msgs, &SetAsync{Props: props})
	}
	for _, m := range msgs {
		if err := s.send(m); err != nil {
			return err
		}
	}
	_, err := s.request(ctx, &BarrierRequest{})
	return err
}

// readRaw reads one whole message.
func readRaw(r *bufio.Reader) ([]byte, error) {
	hdr, err := r.Peek(HeaderLen)
	if err != nil {
		return nil, err
	}
	n := int(hdr[2])<<8 | int(hdr[3])
	if n < HeaderLen {
		return nil, &DecodeError{What: "header", Offset: 2, Err: ErrBadLength}
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

func (s *session) close(err error) {
	s.once.Do(func() {
		s.err = err
		s.nc.Close()
		s.pmu.Lock()
		for x, p := range s.pending {
			p.err = fmt.Errorf("%w: %v", ErrDisconnected, err)
			if errors.Is(err, ErrClosed) {
				p.err = ErrClosed
			}
			close(p.ch)
			delete(s.pending, x)
		}
		s.pmu.Unlock()
		close(s.dead)
	})
}

func (s *session) keepalive() {
	iv := s.c.opts.EchoInterval
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-s.dead:
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, s.lastRx.Load())) < iv {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), iv)
		_, err := s.request(ctx, &EchoRequest{})
		cancel()
		if err != nil {
			s.close(fmt.Errorf("echo request unanswered for %v: %w", iv, err))
			return
		}
	}
}

func (s *session) readLoop(r *bufio.Reader) {
	defer close(s.readDone)
	for {
		raw, err := readRaw(r)
		if err != nil {
			s.close(fmt.Errorf("reading from switch: %w", err))
			return
		}
		s.lastRx.Store(time.Now().UnixNano())
		if s.wantsCookiesOnly(raw) {
			h, m, err := DecodeFlowCookiesReply(raw)
			if err != nil {
				s.c.log.Warn("undecodable flow cookies reply from switch", "xid", h.Xid, "err", err)
				s.deliver(h, nil, err)
			} else {
				s.deliver(h, m, nil)
			}
			continue
		}
		h, m, _, err := DecodeMessage(raw)
		if err != nil {
			s.c.log.Warn("undecodable message from switch", "type", typeName(h.Type), "xid", h.Xid, "err", err)
			s.deliver(h, nil, err)
			continue
		}
		switch m := m.(type) {
		case *EchoRequest:
			// Never block the reader on the write lock: a large bundle may
			// hold it while the switch waits for us to read its replies.
			go s.send0(h.Xid, &EchoReply{Data: m.Data})
			continue
		case *PacketIn:
			s.c.emit(Event{Kind: EventPacketIn, DatapathID: s.features.DatapathID, PacketIn: m})
			continue
		case *PortStatus:
			s.c.emit(Event{Kind: EventPortStatus, DatapathID: s.features.DatapathID, PortStatus: m})
			continue
		case *FlowRemoved:
			s.c.emit(Event{Kind: EventFlowRemoved, DatapathID: s.features.DatapathID, FlowRemoved: m})
			continue
		}
		s.deliver(h, m, nil)
	}
}

// wantsCookiesOnly: raw is a multipart reply to a FlowCookiesRequest, to
// be decoded only as far as its cookies.
func (s *session) wantsCookiesOnly(raw []byte) bool {
	if len(raw) < HeaderLen || raw[1] != typeMultipartReply {
		return false
	}
	xid := binary.BigEndian.Uint32(raw[4:8])
	s.pmu.Lock()
	defer s.pmu.Unlock()
	p := s.pending[xid]
	if p == nil {
		return false
	}
	_, ok := p.req.(*FlowCookiesRequest)
	return ok
}

func multipartMore(m Message) (bool, bool) {
	switch m := m.(type) {
	case *FlowStatsReply:
		return true, m.Flags&MultipartMore != 0
	case *FlowCookiesReply:
		return true, m.Flags&MultipartMore != 0
	case *PortDescReply:
		return true, m.Flags&MultipartMore != 0
	case *GroupDescReply:
		return true, m.Flags&MultipartMore != 0
	case *MeterStatsReply:
		return true, m.Flags&MultipartMore != 0
	case *GroupStatsReply:
		return true, m.Flags&MultipartMore != 0
	case *MultipartUnknown:
		return true, m.Flags&MultipartMore != 0
	}
	return false, false
}

func (s *session) deliver(h Header, m Message, derr error) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	var serr *SwitchError
	if em, ok := m.(*ErrorMsg); ok {
		serr = &SwitchError{Code: em.Code, Experimenter: em.Experimenter, Xid: h.Xid, Data: em.Data, Index: -1}
	}
	if p := s.pending[h.Xid]; p != nil {
		switch {
		case derr != nil:
			p.err = derr
		case serr != nil:
			p.err = serr
		default:
			if mp, more := multipartMore(m); mp {
				p.parts = append(p.parts, m)
				if more {
					return
				}
			}
			p.msg = m
		}
		delete(s.pending, h.Xid)
		close(p.ch)
		return
	}
	if serr != nil {
		for _, bs := range s.bundles {
			if h.Xid >= bs.first && h.Xid <= bs.last {
				bs.errs = append(bs.errs, serr)
				return
			}
		}
		s.c.log.Warn("switch error for a request nobody waits for", "xid", h.Xid, "err", serr.Code.String())
	}
}

// send0 encodes m and flushes it.
func (s *session) send0(xid uint32, m Message) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var err error
	s.wbuf, err = AppendMessage(s.wbuf[:0], xid, m)
	if err != nil {
		return err
	}
	if _, err = s.w.Write(s.wbuf); err == nil {
		err = s.w.Flush()
	}
	if err != nil {
		s.close(fmt.Errorf("writing to switch: %w", err))
	}
	return err
}

func (s *session) send(m Message) error { return s.send0(s.c.nextXids(1), m) }

func (s *session) register(xid uint32, req Message) *pending {
	p := &pending{ch: make(chan struct{}), req: req}
	s.pmu.Lock()
	select {
	case <-s.dead:
		p.err = fmt.Errorf("%w: %v", ErrDisconnected, s.err)
		close(p.ch)
	default:
		s.pending[xid] = p
	}
	s.pmu.Unlock()
	return p
}

func (s *session) wait(ctx context.Context, xid uint32, p *pending) (Message, error) {
	select {
	case <-p.ch:
	case <-ctx.Done():
		s.pmu.Lock()
		delete(s.pending, xid)
		s.pmu.Unlock()
		return nil, fmt.Errorf("waiting for switch reply to xid %#x: %w", xid, ctx.Err())
	}
	if p.err != nil {
		var se *SwitchError
		if errors.As(p.err, &se) {
			se.Request = describe(p.req)
		}
		return nil, p.err
	}
	if p.parts != nil {
		return &multipartParts{parts: p.parts}, nil
	}
	return p.msg, nil
}

// multipartParts carries the joined replies of a multipart request
// internally; Request unwraps it.
type multipartParts struct{ parts []Message }

func (*multipartParts) msgType() uint8                      { return typeMultipartReply }
func (*multipartParts) appendBody(b []byte) ([]byte, error) { return b, errors.New("not encodable") }

func (s *session) request(ctx context.Context, m Message) (Message, error) {
	xid := s.c.nextXids(1)
	p := s.register(xid, m)
	if err := s.send0(xid, m); err != nil {
		s.pmu.Lock()
		delete(s.pending, xid)
		s.pmu.Unlock()
		return nil, err
	}
	return s.wait(ctx, xid, p)
}

func describe(m Message) string {
	switch m := m.(type) {
	case *FlowMod:
		return m.String()
	case *GroupMod:
		return m.Command.String() + " " + (&GroupDesc{Type: m.Type, GroupID: m.GroupID, Buckets: m.Buckets}).String()
	case nil:
		return ""
	}
	return fmt.Sprintf("%T", m)
}

// isWriteErr tells I/O failures apart from encoding errors.
func isWriteErr(err error) bool { return !errors.Is(err, ErrBadValue) && !errors.Is(err, ErrTooLong) }

// session returns the live session, waiting for a reconnect if needed.
func (c *Conn) session(ctx context.Context) (*session, error) {
	for {
		c.mu.Lock()
		s, ready, closed := c.cur, c.ready, c.closed
		c.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if s != nil {
			return s, nil
		}
		select {
		case <-ready:
		case <-c.stop:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for switch connection to %s: %w", c.addr, ctx.Err())
		}
	}
}

// Send sends m without waiting for a reply. Errors the switch reports
// for it are logged; use Request or Bundle to receive them.
func (c *Conn) Send(ctx context.Context, m Message) error {
	s, err := c.session(ctx)
	if err != nil {
		return err
	}
	return s.send(m)
}

// Request sends m and waits for its reply (for a multipart request, the
// first part; use DumpFlows and friends to get all parts joined). A
// request without a reply of its own (FLOW_MOD, GROUP_MOD, ...) is
// followed by a barrier so its success or *SwitchError is known.
func (c *Conn) Request(ctx context.Context, m Message) (Message, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	if !hasReply(m) {
		return nil, c.sendWithBarrier(ctx, s, m)
	}
	rep, err := s.request(ctx, m)
	if mp, ok := rep.(*multipartParts); ok {
		return mp.parts[0], err
	}
	return rep, err
}

func hasReply(m Message) bool {
	switch m.(type) {
	case *EchoRequest, *FeaturesRequest, *GetConfigRequest, *BarrierRequest, *RoleRequest,
		*FlowStatsRequest, *PortDescRequest, *GroupDescRequest, *MeterStatsRequest, *BundleControl:
		return true
	case *MultipartUnknown:
		return true
	}
	return false
}

// sendWithBarrier sends m, then a barrier, and reports m's error if any.
func (c *Conn) sendWithBarrier(ctx context.Context, s *session, m Message) error {
	xid := c.nextXids(2)
	p := s.register(xid, m)
	if err := s.send0(xid, m); err != nil {
		return err
	}
	bp := s.register(xid+1, nil)
	if err := s.send0(xid+1, &BarrierRequest{}); err != nil {
		return err
	}
	if _, err := s.wait(ctx, xid+1, bp); err != nil {
		return err
	}
	// The barrier reply arrived, so any error for m arrived before it.
	s.pmu.Lock()
	delete(s.pending, xid)
	s.pmu.Unlock()
	select {
	case <-p.ch:
		if p.err != nil {
			var se *SwitchError
			if errors.As(p.err, &se) {
				se.Request = describe(m)
			}
		}
		return p.err
	default:
		return nil
	}
}

// Barrier waits until the switch has processed everything sent before.
func (c *Conn) Barrier(ctx context.Context) error {
	_, err := c.Request(ctx, &BarrierRequest{})
	return err
}

// multipart runs a multipart request and returns all reply parts.
func (c *Conn) multipart(ctx context.Context, m Message) ([]Message, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	rep, err := s.request(ctx, m)
	if err != nil {
		return nil, err
	}
	if mp, ok := rep.(*multipartParts); ok {
		return mp.parts, nil
	}
	return []Message{rep}, nil
}

// collect runs a multipart request and joins the items of its reply
// parts, refusing a part of another type (what names the request).
func collect[R Message, T any](ctx context.Context, c *Conn, req Message, what string, items func(R) []T) ([]T, error) {
	parts, err := c.multipart(ctx, req)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, p := range parts {
		r, ok := p.(R)
		if !ok {
			return nil, fmt.Errorf("%s: unexpected reply %T", what, p)
		}
		out = append(out, items(r)...)
	}
	return out, nil
}

// DumpFlows returns the flows selected by req (use Table: TableAll for all
// tables), in the order the switch reports them.
func (c *Conn) DumpFlows(ctx context.Context, req FlowStatsRequest) ([]FlowStats, error) {
	return collect(ctx, c, &req, "flow stats", func(r *FlowStatsReply) []FlowStats { return r.Flows })
}

// PortDesc returns every port of the bridge.
func (c *Conn) PortDesc(ctx context.Context) ([]Port, error) {
	return collect(ctx, c, &PortDescRequest{}, "port desc", func(r *PortDescReply) []Port { return r.Ports })
}

// GroupDesc returns the groups (GroupAll for every group).
func (c *Conn) GroupDesc(ctx context.Context, id uint32) ([]GroupDesc, error) {
	return collect(ctx, c, &GroupDescRequest{GroupID: id}, "group desc", func(r *GroupDescReply) []GroupDesc { return r.Groups })
}

// MeterStats returns meter statistics (MeterAll for every meter).
func (c *Conn) MeterStats(ctx context.Context, id uint32) ([]MeterStats, error) {
	return collect(ctx, c, &MeterStatsRequest{MeterID: id}, "meter stats", func(r *MeterStatsReply) []MeterStats { return r.Meters })
}

// GroupStats returns group counters (GroupAll for every group).
func (c *Conn) GroupStats(ctx context.Context, id uint32) ([]GroupStats, error) {
	return collect(ctx, c, &GroupStatsRequest{GroupID: id}, "group stats", func(r *GroupStatsReply) []GroupStats { return r.Groups })
}

var bundleIDs atomic.Uint32

// Bundle applies msgs (flow, group and meter mods) in order inside
// OpenFlow bundles and returns when the switch has committed them. With
// atomic, all of msgs go into one bundle that the switch applies
// all-or-nothing; on failure the switch is unchanged and the returned
// *SwitchError names the failing message (Index, Request). Without
// atomic, batches over Options.BundleLimit are split into consecutive
// bundles; a failure stops at the failing bundle (earlier ones stay).
func (c *Conn) Bundle(ctx context.Context, msgs []Message, atomic bool) error {
	if len(msgs) == 0 {
		return nil
	}
	s, err := c.session(ctx)
	if err != nil {
		return err
	}
	limit := c.opts.BundleLimit
	if atomic {
		limit = len(msgs)
	}
	for start := 0; start < len(msgs); start += limit {
		end := min(start+limit, len(msgs))
		if err := c.bundleOnce(ctx, s, msgs[start:end], start, atomic); err != nil {
			return err
		}
	}
	return nil
}

// BundleFlows is Bundle for flow mods, without building a []Message.
func (c *Conn) BundleFlows(ctx context.Context, mods []FlowMod, atomic bool) error {
	msgs := make([]Message, len(mods))
	for i := range mods {
		msgs[i] = &mods[i]
	}
	return c.Bundle(ctx, msgs, atomic)
}

func (c *Conn) bundleOnce(ctx context.Context, s *session, msgs []Message, offset int, atomic bool) error {
	id := bundleIDs.Add(1)
	flags := BundleOrdered
	if atomic {
		flags |= BundleAtomic
	}
	n := len(msgs)
	// xids: open, n adds (inner xid = outer xid), commit.
	base := c.nextXids(n + 2)
	bs := &bundleState{first: base + 1, last: base + uint32(n)}
	s.pmu.Lock()
	s.bundles = append(s.bundles, bs)
	s.pmu.Unlock()
	defer func() {
		s.pmu.Lock()
		for i, b := range s.bundles {
			if b == bs {
				s.bundles = append(s.bundles[:i], s.bundles[i+1:]...)
				break
			}
		}
		s.pmu.Unlock()
	}()
	// Open and add everything, then a barrier: OVS rejects a bad message
	// at BUNDLE_ADD time but keeps the bundle open, so committing after
	// such an error would apply the rest. We commit only when the barrier
	// shows no add failed, and discard otherwise.
	openP := s.register(base, nil)
	commitXid := base + uint32(n) + 1
	barrierXid := c.nextXids(1)
	barrierP := s.register(barrierXid, nil)

	pace := pacerFrom(ctx)
	s.wmu.Lock()
	buf := s.wbuf[:0]
	var err error
	buf, _ = AppendMessage(buf, base, &BundleControl{ID: id, Type: BundleOpenRequest, Flags: flags})
	add := BundleAdd{ID: id, Flags: flags}
	for i, m := range msgs {
		add.Xid, add.Message = base+1+uint32(i), m
		if buf, err = AppendMessage(buf, add.Xid, &add); err != nil {
			break
		}
		if len(buf) >= 128<<10 || (pace != nil && i%pacedPart == pacedPart-1) {
			if _, err = s.w.Write(buf); err != nil {
				break
			}
			buf = buf[:0]
			if pace != nil {
				// Flushed first, so the switch never waits on a message
				// half written while we pause.
				if err = s.w.Flush(); err != nil {
					break
				}
				pace(ctx)
			}
		}
	}
	var encErr error
	if err != nil && !isWriteErr(err) {
		// Bad input: nothing was committed; discard what was added.
		encErr = fmt.Errorf("bundle message %d (%s): %w", offset+int(add.Xid-base-1), describe(add.Message), err)
		err = nil
	}
	if err == nil {
		buf, _ = AppendMessage(buf, barrierXid, &BarrierRequest{})
		if _, err = s.w.Write(buf); err == nil {
			err = s.w.Flush()
		}
	}
	s.wbuf = buf[:0]
	s.wmu.Unlock()
	if err != nil {
		s.close(fmt.Errorf("writing to switch: %w", err))
		return fmt.Errorf("%w: %v", ErrDisconnected, err)
	}
	if _, err := s.wait(ctx, barrierXid, barrierP); err != nil {
		// Best effort: do not leave the bundle open on the switch.
		s.send0(commitXid, &BundleControl{ID: id, Type: BundleDiscardRequest, Flags: flags})
		return fmt.Errorf("bundle not committed: %w", err)
	}
	s.pmu.Lock()
	addErrs := len(bs.errs)
	s.pmu.Unlock()
	ctlType := BundleCommitRequest
	if addErrs > 0 || encErr != nil {
		ctlType = BundleDiscardRequest
	} else if pace != nil {
		pace(ctx)
	}
	commitP := s.register(commitXid, nil)
	if err := s.send0(commitXid, &BundleControl{ID: id, Type: ctlType, Flags: flags}); err != nil {
		return err
	}
	if encErr != nil {
		s.wait(ctx, commitXid, commitP)
		return encErr
	}
	_, oerr := s.wait(ctx, base, openP)
	_, cerr := s.wait(ctx, commitXid, commitP)
	s.pmu.Lock()
	errs := bs.errs
	s.pmu.Unlock()
	if len(errs) > 0 {
		e := errs[0]
		idx := int(e.Xid - base - 1)
		if idx >= 0 && idx < len(msgs) {
			e.Index = offset + idx
			e.Request = describe(msgs[idx])
		}
		return e
	}
	if oerr != nil {
		return fmt.Errorf("opening bundle: %w", oerr)
	}
	if cerr != nil {
		return fmt.Errorf("committing bundle: %w", cerr)
	}
	return nil
}
