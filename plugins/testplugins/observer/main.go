// Command observer is a test plugin that watches the cluster through the
// host: it subscribes to node events and node facts changes and appends
// each one as a JSON line to the file its config names, optionally declares
// an encapsulation overhead, and at start proves its cluster credentials by
// reading its own Node from the apiserver with the host's token (no
// client-go: a plugin needs only the SDK). Its name comes from its first
// argument, so one agent can run several.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"switchyard.dev/switchyard/sdk"
)

// config is the plugin's section of the agent config.
type config struct {
	// EventsFile receives one JSON line per observation.
	EventsFile string `json:"eventsFile"`
	// CheckAPIServer reads the plugin's own Node from the apiserver at
	// start, with the credentials the host handed over.
	CheckAPIServer bool `json:"checkAPIServer"`
}

// Line is one observation, as the tests read it back.
type Line struct {
	Kind     string   `json:"kind"` // start, node-added, node-updated, node-deleted, facts, apiserver
	Node     string   `json:"node,omitempty"`
	IPs      []string `json:"ips,omitempty"`
	PodCIDRs []string `json:"podCIDRs,omitempty"`
	MTU      int      `json:"mtu,omitempty"`
	PodMTU   int      `json:"podMTU,omitempty"`
	// Status is the apiserver's HTTP status for GET of this plugin's Node.
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

type observer struct {
	name     string
	overhead int

	mu  sync.Mutex
	out io.Writer
}

func (o *observer) Describe(_ context.Context, _ sdk.DescribeRequest, r *sdk.DescribeResponse) error {
	r.Name, r.Version, r.EncapOverhead = o.name, "1.0.0", o.overhead
	return nil
}

func (o *observer) write(l Line) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.out == nil {
		return
	}
	b, _ := json.Marshal(l)
	_, _ = o.out.Write(append(b, '\n'))
}

func facts(kind string, n sdk.NodeFacts) Line {
	l := Line{Kind: kind, Node: n.Name, MTU: n.MTU, PodMTU: n.PodMTU}
	for _, ip := range n.NodeIPs {
		l.IPs = append(l.IPs, ip.String())
	}
	for _, p := range n.PodCIDRs {
		l.PodCIDRs = append(l.PodCIDRs, p.String())
	}
	return l
}

func (o *observer) Start(ctx context.Context, req sdk.StartRequest, _ *sdk.StartResponse) error {
	var cfg config
	if err := json.Unmarshal(req.Config, &cfg); err != nil || cfg.EventsFile == "" {
		return fmt.Errorf("observer config needs eventsFile: %s (%v)", req.Config, err)
	}
	f, err := os.OpenFile(cfg.EventsFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.out = f
	o.mu.Unlock()
	o.write(facts("start", req.Node))
	if cfg.CheckAPIServer {
		o.write(checkAPIServer(ctx, req.Cluster, req.Node.Name))
	}
	return req.Host.Synced(ctx)
}

// checkAPIServer reads this node's Node with the host's token and CA.
func checkAPIServer(ctx context.Context, c sdk.Cluster, node string) Line {
	l := Line{Kind: "apiserver", Node: node}
	tlsCfg, err := c.APIServer.TLSConfig()
	if err != nil || c.APIServer.URL == "" {
		l.Error = fmt.Sprintf("no apiserver endpoint (%q): %v", c.APIServer.URL, err)
		return l
	}
	tok, err := c.Tokens.Token(ctx)
	if err != nil {
		l.Error = err.Error()
		return l
	}
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.APIServer.URL+"/api/v1/nodes/"+node, nil)
	hreq.Header.Set("Authorization", "Bearer "+tok)
	resp, err := cl.Do(hreq)
	if err != nil {
		l.Error = err.Error()
		return l
	}
	resp.Body.Close()
	l.Status = resp.StatusCode
	return l
}

func (o *observer) NodeEvent(_ context.Context, req sdk.NodeEventRequest, _ *sdk.NodeEventResponse) error {
	l := Line{Kind: []string{"", "node-added", "node-updated", "node-deleted"}[min(int(req.Kind), 3)], Node: req.Node.Name}
	for _, ip := range req.Node.NodeIPs {
		l.IPs = append(l.IPs, ip.String())
	}
	for _, p := range req.Node.PodCIDRs {
		l.PodCIDRs = append(l.PodCIDRs, p.String())
	}
	o.write(l)
	return nil
}

func (o *observer) NodeFactsChanged(_ context.Context, req sdk.NodeFactsChangedRequest, _ *sdk.NodeFactsChangedResponse) error {
	o.write(facts("facts", req.New))
	return nil
}

var (
	_ sdk.NodeEventSubscriber = (*observer)(nil)
	_ sdk.NodeFactsSubscriber = (*observer)(nil)
)

// main: observer NAME [ENCAP_OVERHEAD]. Describe sees no config, so the
// name and the overhead it declares come from the arguments.
func main() {
	o := &observer{name: "observer"}
	if len(os.Args) > 1 {
		o.name = os.Args[1]
	}
	if len(os.Args) > 2 {
		fmt.Sscanf(os.Args[2], "%d", &o.overhead)
	}
	sdk.Serve(o)
}
