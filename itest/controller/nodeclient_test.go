package controller

import (
	"context"
	"fmt"
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
	"switchyard.dev/switchyard/itest/testenv"
)

// nodeClient watches as one node and applies the stream into a model, the
// way an agent would.
type nodeClient struct {
	t     *testing.T
	node  string
	token string
	conn  *grpc.ClientConn

	mu       sync.Mutex
	synced   bool
	epoch    string
	version  uint64
	events   []*apiv1.WatchEvent // since the last mark
	policies map[string]*apiv1.Policy
	atgs     map[uint32]map[string]bool
	ags      map[uint32]map[string]bool
	err      error
	cancel   context.CancelFunc
	done     chan struct{}
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

func newNodeClient(t *testing.T, conn *grpc.ClientConn, node, token string) *nodeClient {
	c := &nodeClient{t: t, node: node, token: token, conn: conn}
	t.Cleanup(c.stop)
	return c
}

// start opens the watch, resuming from the last applied version if resume
// is set, and returns once the first event arrived or the stream failed.
func (c *nodeClient) start(t *testing.T, resume bool) {
	ctx, cancel := context.WithCancel(context.Background())
	req := &apiv1.WatchRequest{NodeName: c.node}
	c.mu.Lock()
	if resume {
		req.ResumeEpoch, req.ResumeVersion = c.epoch, c.version
	}
	c.synced, c.err, c.cancel, c.done = false, nil, cancel, make(chan struct{})
	c.mu.Unlock()
	stream, err := apiv1.NewPolicyDistributionClient(c.conn).Watch(withToken(ctx, c.token), req)
	if err != nil {
		t.Fatalf("node %s: opening watch: %v", c.node, err)
	}
	done := c.done
	go func() {
		defer close(done)
		for {
			ev, err := stream.Recv()
			if err != nil {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
				return
			}
			c.apply(ev)
		}
	}()
}

func (c *nodeClient) stop() {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func memberKey(m *apiv1.Member) string {
	var ips []string
	for _, b := range m.Ips {
		a, _ := netip.AddrFromSlice(b)
		ips = append(ips, a.String())
	}
	return m.Namespace + "/" + m.Name + "@" + m.Node + "[" + strings.Join(ips, ",") + "]"
}

func (c *nodeClient) apply(ev *apiv1.WatchEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
	c.epoch, c.version = ev.Epoch, ev.Version
	set := func(ms []*apiv1.Member) map[string]bool {
		s := map[string]bool{}
		for _, m := range ms {
			s[memberKey(m)] = true
		}
		return s
	}
	patch := func(s map[string]bool, p *apiv1.GroupPatch) {
		if s == nil {
			c.t.Errorf("node %s: patch for unknown group %d", c.node, p.Id)
			return
		}
		for _, m := range p.Removed {
			delete(s, memberKey(m))
		}
		for _, m := range p.Added {
			s[memberKey(m)] = true
		}
	}
	switch x := ev.Event.(type) {
	case *apiv1.WatchEvent_Reset_:
		c.synced = false
		c.policies, c.atgs, c.ags = map[string]*apiv1.Policy{}, map[uint32]map[string]bool{}, map[uint32]map[string]bool{}
	case *apiv1.WatchEvent_Resumed:
		c.synced = false
	case *apiv1.WatchEvent_Synced:
		c.synced = true
	case *apiv1.WatchEvent_PolicyUpsert:
		c.policies[x.PolicyUpsert.Uid] = x.PolicyUpsert
	case *apiv1.WatchEvent_PolicyDelete:
		delete(c.policies, x.PolicyDelete)
	case *apiv1.WatchEvent_AppliedToGroupUpsert:
		c.atgs[x.AppliedToGroupUpsert.Id] = set(x.AppliedToGroupUpsert.Members)
	case *apiv1.WatchEvent_AppliedToGroupPatch:
		patch(c.atgs[x.AppliedToGroupPatch.Id], x.AppliedToGroupPatch)
	case *apiv1.WatchEvent_AppliedToGroupDelete:
		delete(c.atgs, x.AppliedToGroupDelete)
	case *apiv1.WatchEvent_AddressGroupUpsert:
		c.ags[x.AddressGroupUpsert.Id] = set(x.AddressGroupUpsert.Members)
	case *apiv1.WatchEvent_AddressGroupPatch:
		patch(c.ags[x.AddressGroupPatch.Id], x.AddressGroupPatch)
	case *apiv1.WatchEvent_AddressGroupDelete:
		delete(c.ags, x.AddressGroupDelete)
	}
}

// view is the node's state in comparable form: for each policy, its rules'
// applied-to members and peers resolved through the groups the node holds.
type view map[string][]string

func (c *nodeClient) view() view {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := view{}
	names := func(groups map[uint32]map[string]bool, ids []uint32) string {
		var out []string
		for _, id := range ids {
			for m := range groups[id] {
				out = append(out, m)
			}
		}
		sort.Strings(out)
		return strings.Join(slices.Compact(out), " ")
	}
	for uid, p := range c.policies {
		var rules []string
		for _, r := range p.Rules {
			var ports []string
			for _, pt := range r.Ports {
				ports = append(ports, fmt.Sprintf("%s/%d-%d%s", pt.Protocol, pt.Port, pt.EndPort, pt.Name))
			}
			line := fmt.Sprintf("%s %s to={%s} peers={%s} ports=%v", r.Direction, r.Action, names(c.atgs, r.AppliedToGroups), names(c.ags, r.AddressGroups), ports)
			for _, b := range r.IpBlocks {
				line += fmt.Sprintf(" block=%s-%v", b.Cidr, b.Except)
			}
			rules = append(rules, line)
		}
		if len(rules) == 0 {
			rules = []string{fmt.Sprintf("isolate to={%s}", names(c.atgs, p.AppliedToGroups))}
		}
		v[uid] = rules
	}
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
		synced, serr := c.synced, c.err
		c.mu.Unlock()
		if serr != nil {
			return testenv.Permanent(fmt.Errorf("stream ended: %w", serr))
		}
		if !synced {
			return fmt.Errorf("not synced yet")
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
