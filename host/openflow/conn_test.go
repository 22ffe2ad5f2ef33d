package openflow

import (
	"bufio"
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

// fakeSwitch is the I/O seam for Conn's unit tests: a unix socket server
// speaking just enough OpenFlow, built on this package's own codec. The
// live tests in itest/openflow check Conn against real ovs-vswitchd.
type fakeSwitch struct {
	t     *testing.T
	ln    net.Listener
	dpid  uint64
	mu    sync.Mutex
	conns []net.Conn
	echo  chan []byte   // payloads of echo replies received
	pings chan struct{} // one per echo request received
	adds  atomic.Int64  // bundle messages received
	wg    sync.WaitGroup
}

func newFakeSwitch(t *testing.T) *fakeSwitch { return newFakeSwitchOn(t, "unix") }

func newFakeSwitchOn(t *testing.T, network string) *fakeSwitch {
	addr := filepath.Join(t.TempDir(), "br.mgmt")
	if network == "tcp" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeSwitch{t: t, ln: ln, dpid: 0x42, echo: make(chan []byte, 4), pings: make(chan struct{}, 100)}
	fs.wg.Add(1)
	go fs.accept()
	t.Cleanup(func() {
		ln.Close()
		fs.dropAll()
		fs.wg.Wait()
	})
	return fs
}

func (fs *fakeSwitch) addr() string { return fs.ln.Addr().String() }

func (fs *fakeSwitch) dropAll() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, c := range fs.conns {
		c.Close()
	}
	fs.conns = nil
}

func (fs *fakeSwitch) accept() {
	defer fs.wg.Done()
	for {
		c, err := fs.ln.Accept()
		if err != nil {
			return
		}
		fs.mu.Lock()
		fs.conns = append(fs.conns, c)
		fs.mu.Unlock()
		fs.wg.Add(1)
		go fs.serve(c)
	}
}

func (fs *fakeSwitch) serve(c net.Conn) {
	defer fs.wg.Done()
	defer c.Close()
	r := bufio.NewReader(c)
	var wmu sync.Mutex
	send := func(xid uint32, m Message) {
		b, err := Marshal(xid, m)
		if err != nil {
			panic(err)
		}
		wmu.Lock()
		c.Write(b)
		wmu.Unlock()
	}
	send(0, &Hello{})
	bundles := map[uint32]bool{}
	for {
		raw, err := readRaw(r)
		if err != nil {
			return
		}
		h, m, _, err := DecodeMessage(raw)
		if err != nil {
			send(h.Xid, &ErrorMsg{Code: ErrorCode{1, 1}, Data: raw})
			continue
		}
		switch m := m.(type) {
		case *FeaturesRequest:
			send(h.Xid, &FeaturesReply{DatapathID: fs.dpid, NTables: 254})
			// Probe the client's echo handling.
			send(0xeeee, &EchoRequest{Data: []byte("ping")})
		case *EchoReply:
			if h.Xid == 0xeeee {
				fs.echo <- m.Data
			}
		case *EchoRequest:
			select {
			case fs.pings <- struct{}{}:
			default:
			}
			send(h.Xid, &EchoReply{Data: m.Data})
		case *BarrierRequest:
			send(h.Xid, &BarrierReply{})
		case *FlowMod:
			// Table 99 does not exist on this switch.
			if m.Flow.Table == 99 {
				send(h.Xid, &ErrorMsg{Code: ErrCodeBadTableID, Data: raw[:min(len(raw), 64)]})
			}
		case *FlowStatsRequest:
			// Two parts: the first flagged "more".
			send(h.Xid, &FlowStatsReply{Flags: MultipartMore, Flows: []FlowStats{{Flow: Flow{Table: 1, Priority: 1}}}})
			send(h.Xid, &FlowStatsReply{Flows: []FlowStats{{Flow: Flow{Table: 2, Priority: 2}}}})
		case *BundleControl:
			switch m.Type {
			case BundleOpenRequest:
				bundles[m.ID] = false
				send(h.Xid, &BundleControl{ID: m.ID, Type: BundleOpenReply})
			case BundleCommitRequest:
				if bundles[m.ID] {
					send(h.Xid, &ErrorMsg{Code: ErrCodeBundleMsgFailed})
				} else {
					send(h.Xid, &BundleControl{ID: m.ID, Type: BundleCommitReply})
				}
			case BundleDiscardRequest:
				send(h.Xid, &BundleControl{ID: m.ID, Type: BundleDiscardReply})
			}
		case *BundleAdd:
			fs.adds.Add(1)
			if fm, ok := m.Message.(*FlowMod); ok && fm.Flow.Table == 99 {
				send(m.Xid, &ErrorMsg{Code: ErrCodeBadTableID})
			}
		}
	}
}

func dialFake(t *testing.T, fs *fakeSwitch, opts Options) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, fs.ln.Addr().Network(), fs.addr(), opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	return c
}

func TestConnRequestsAndErrors(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // runs after the other cleanups
	fs := newFakeSwitch(t)
	c := dialFake(t, fs, Options{})
	defer c.Close()
	if got := c.DatapathID(); got != 0x42 {
		t.Errorf("DatapathID = %#x, want 0x42", got)
	}
	ev := <-c.Events()
	if ev.Kind != EventConnected || ev.Reconnect {
		t.Errorf("first event = %+v, want EventConnected without Reconnect", ev)
	}
	select {
	case got := <-fs.echo:
		if string(got) != "ping" {
			t.Errorf("echo reply payload %q, want ping", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no echo reply from the client within 5s")
	}

	// Pipelined requests from many goroutines: each error reaches the
	// caller whose request caused it, and only that caller.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			table := uint8(1)
			if i%4 == 0 {
				table = 99
			}
			_, errs[i] = c.Request(ctx, &FlowMod{Flow: Flow{Table: table, Priority: uint16(i)}})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i%4 == 0 {
			var se *SwitchError
			if !errors.As(err, &se) || !errors.Is(err, ErrCodeBadTableID) {
				t.Errorf("request %d to table 99: got %v, want OFPFMFC_BAD_TABLE_ID", i, err)
			} else if want := "ADD table=99, priority=" + string(appendUint(nil, uint64(i))) + " actions=drop"; se.Request != want {
				t.Errorf("request %d: error names %q, want %q", i, se.Request, want)
			}
		} else if err != nil {
			t.Errorf("request %d: unexpected error %v", i, err)
		}
	}

	flows, err := c.DumpFlows(ctx, FlowStatsRequest{Table: TableAll})
	if err != nil {
		t.Fatalf("DumpFlows: %v", err)
	}
	if diff := cmp.Diff([]uint8{1, 2}, []uint8{flows[0].Flow.Table, flows[1].Flow.Table}); diff != "" || len(flows) != 2 {
		t.Errorf("multipart parts not joined: %+v", flows)
	}

	// Bundle: a failing add is reported with its index, and the bundle is
	// discarded rather than committed.
	mods := []FlowMod{{Flow: Flow{Table: 1}}, {Flow: Flow{Table: 99}}, {Flow: Flow{Table: 2}}}
	err = c.BundleFlows(ctx, mods, true)
	var se *SwitchError
	if !errors.As(err, &se) || se.Index != 1 {
		t.Fatalf("bundle with bad flow: got %v, want SwitchError at index 1", err)
	}
	if err := c.BundleFlows(ctx, mods[:1], true); err != nil {
		t.Fatalf("good bundle: %v", err)
	}
	// Bad input is refused before anything is sent.
	err = c.BundleFlows(ctx, []FlowMod{{Flow: Flow{Instructions: []Instruction{Apply(Conjunction{ID: 1, Clause: 3, NClauses: 2})}}}}, true)
	if !errors.Is(err, ErrBadValue) {
		t.Fatalf("bundle with invalid conjunction: got %v, want ErrBadValue", err)
	}
}

func TestConnReconnectAndClose(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // runs after the other cleanups
	fs := newFakeSwitch(t)
	c := dialFake(t, fs, Options{ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	if ev := <-c.Events(); ev.Kind != EventConnected {
		t.Fatalf("first event %+v", ev)
	}
	fs.dpid = 0x43
	fs.dropAll()
	want := []EventKind{EventDisconnected, EventConnected}
	for _, k := range want {
		select {
		case ev := <-c.Events():
			if ev.Kind != k {
				t.Fatalf("event %+v, want kind %d", ev, k)
			}
			if k == EventConnected && (!ev.Reconnect || !ev.NewDatapath || ev.DatapathID != 0x43) {
				t.Errorf("reconnect event %+v, want Reconnect, NewDatapath, dpid 0x43", ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no event of kind %d within 5s", k)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Barrier(ctx); err != nil {
		t.Fatalf("barrier after reconnect: %v", err)
	}
	c.Close()
	if err := c.Barrier(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("barrier after Close: got %v, want ErrClosed", err)
	}
	for range c.Events() { // closed by Close
	}
}

func TestConnKeepalive(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	fs := newFakeSwitchOn(t, "tcp") // also covers dialing over TCP
	c := dialFake(t, fs, Options{EchoInterval: 20 * time.Millisecond})
	defer c.Close()
	// An idle connection is probed with echo requests.
	for i := range 2 {
		select {
		case <-fs.pings:
		case <-time.After(5 * time.Second):
			t.Fatalf("echo request %d not seen within 5s", i)
		}
	}
}
