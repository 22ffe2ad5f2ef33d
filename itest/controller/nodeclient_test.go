package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
	"switchyard.dev/switchyard/controller/client"
	"switchyard.dev/switchyard/itest/testenv"
)

// nodeClient watches as one node through controller/client, the library
// the agent's netpol plugin uses, and also records the raw events so tests
// can assert the protocol itself.
type nodeClient struct {
	t     *testing.T
	node  string
	token string
	addr  string

	mu     sync.Mutex
	c      *client.Client
	last   *client.State       // the span when the client was last stopped
	events []*apiv1.WatchEvent // since the last mark
	err    error               // why the stream last went down
	cancel context.CancelFunc
	done   chan struct{}
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dialing controller at %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func withToken(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func newNodeClient(t *testing.T, addr, node, token string) *nodeClient {
	c := &nodeClient{t: t, node: node, token: token, addr: addr}
	t.Cleanup(c.stop)
	return c
}

// The client.Handler side: the library keeps the state; the raw events are
// recorded for protocol assertions.
func (c *nodeClient) Replace(*client.State)              {}
func (c *nodeClient) Apply(*client.State, client.Change) {}
func (c *nodeClient) Event(ev *apiv1.WatchEvent) {
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
}
func (c *nodeClient) StreamChanged(up bool, err error) {
	c.mu.Lock()
	if !up && err != nil {
		c.err = err
	}
	c.mu.Unlock()
}

// start runs the client; with resume it starts from the span it held when
// it was stopped, so it asks the controller to resume from there.
func (c *nodeClient) start(t *testing.T, resume bool) {
	c.mu.Lock()
	var initial *client.State
	if resume {
		initial = c.last
	}
	c.mu.Unlock()
	cl, err := client.New(client.Config{Address: c.addr, NodeName: c.node, Handler: c, Initial: initial,
		Token: func(context.Context) (string, error) { return c.token, nil },
		Log:   slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("node %s: %v", c.node, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c.mu.Lock()
	c.c, c.err, c.cancel, c.done = cl, nil, cancel, done
	c.mu.Unlock()
	go func() {
		defer close(done)
		cl.Run(ctx)
	}()
}

func (c *nodeClient) stop() {
	c.mu.Lock()
	cl, cancel, done := c.c, c.cancel, c.done
	c.cancel = nil
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	cl.Close()
	cl.View(func(s *client.State) {
		c.mu.Lock()
		c.last = s
		c.mu.Unlock()
	})
}

func memberKey(m *apiv1.Member) string {
	var ips []string
	for _, b := range m.Ips {
		a, _ := netip.AddrFromSlice(b)
		ips = append(ips, a.String())
	}
	return m.Namespace + "/" + m.Name + "@" + m.Node + "[" + strings.Join(ips, ",") + "]"
}

// view is the node's state in comparable form: for each policy, its rules'
// applied-to members and peers resolved through the groups the node holds.
type view map[string][]string

func (c *nodeClient) view() view {
	c.mu.Lock()
	cl := c.c
	c.mu.Unlock()
	v := view{}
	cl.View(func(s *client.State) {
		names := func(groups map[uint32]*client.Group, ids []uint32) string {
			var out []string
			for _, m := range client.Members(groups, ids) {
				out = append(out, memberKey(m))
			}
			sort.Strings(out)
			return strings.Join(slices.Compact(out), " ")
		}
		for uid, p := range s.Policies {
			var rules []string
			for _, r := range p.Rules {
				var ports []string
				for _, pt := range r.Ports {
					ports = append(ports, fmt.Sprintf("%s/%d-%d%s", pt.Protocol, pt.Port, pt.EndPort, pt.Name))
				}
				line := fmt.Sprintf("%s %s to={%s} peers={%s} ports=%v", r.Direction, r.Action, names(s.AppliedToGroups, r.AppliedToGroups), names(s.AddressGroups, r.AddressGroups), ports)
				for _, b := range r.IpBlocks {
					line += fmt.Sprintf(" block=%s-%v", b.Cidr, b.Except)
				}
				rules = append(rules, line)
			}
			if len(rules) == 0 {
				rules = []string{fmt.Sprintf("isolate to={%s}", names(s.AppliedToGroups, p.AppliedToGroups))}
			}
			v[uid] = rules
		}
	})
	return v
}

// mark forgets the events seen so far; eventsSinceMark lists later ones.
func (c *nodeClient) mark() {
	c.mu.Lock()
	c.events = nil
	c.mu.Unlock()
}

func (c *nodeClient) eventsSinceMark() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, ev := range c.events {
		out = append(out, describe(ev))
	}
	return out
}

func describe(ev *apiv1.WatchEvent) string {
	names := func(ms []*apiv1.Member) string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Namespace+"/"+m.Name)
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	switch x := ev.Event.(type) {
	case *apiv1.WatchEvent_Reset_:
		return "reset"
	case *apiv1.WatchEvent_Resumed:
		return "resumed"
	case *apiv1.WatchEvent_Synced:
		return "synced"
	case *apiv1.WatchEvent_PolicyUpsert:
		return "policy+ " + x.PolicyUpsert.Uid
	case *apiv1.WatchEvent_PolicyDelete:
		return "policy- " + x.PolicyDelete
	case *apiv1.WatchEvent_AppliedToGroupUpsert:
		return "atg+ " + names(x.AppliedToGroupUpsert.Members)
	case *apiv1.WatchEvent_AppliedToGroupPatch:
		return "atg~ +" + names(x.AppliedToGroupPatch.Added) + " -" + names(x.AppliedToGroupPatch.Removed)
	case *apiv1.WatchEvent_AppliedToGroupDelete:
		return "atg-"
	case *apiv1.WatchEvent_AddressGroupUpsert:
		return "ag+ " + names(x.AddressGroupUpsert.Members)
	case *apiv1.WatchEvent_AddressGroupPatch:
		return "ag~ +" + names(x.AddressGroupPatch.Added) + " -" + names(x.AddressGroupPatch.Removed)
	case *apiv1.WatchEvent_AddressGroupDelete:
		return "ag-"
	}
	return fmt.Sprintf("%T", ev.Event)
}

// waitView waits until the node is synced and its view satisfies cond.
func (c *nodeClient) waitView(t *testing.T, what string, cond func(view) error) {
	t.Helper()
	err := testenv.Eventually(fmt.Sprintf("node %s: %s", c.node, what), 30*time.Second, 20*time.Millisecond, func() error {
		c.mu.Lock()
		cl, serr := c.c, c.err
		c.mu.Unlock()
		if !cl.Synced() {
			return fmt.Errorf("not synced yet (stream: %v)", serr)
		}
		return cond(c.view())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitEvents waits until the events since the mark satisfy cond.
func (c *nodeClient) waitEvents(t *testing.T, what string, cond func([]string) error) {
	t.Helper()
	err := testenv.Eventually(fmt.Sprintf("node %s: %s", c.node, what), 30*time.Second, 20*time.Millisecond, func() error {
		return cond(c.eventsSinceMark())
	})
	if err != nil {
		t.Fatal(err)
	}
}
