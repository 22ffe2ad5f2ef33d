package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"switchyard.dev/switchyard/host/metrics"
)

// traceTimeout bounds one trace on the agent (dump, walk, descriptions).
const traceTimeout = 10 * time.Second

// PluginStatus is one row of GET /v1/plugins.
type PluginStatus struct {
	Name         string   `json:"name"`
	State        string   `json:"state"`
	Version      string   `json:"version"`
	APIVersion   int      `json:"apiVersion"`
	PID          int      `json:"pid"`
	Restarts     int      `json:"restarts"`
	Flows        int      `json:"flows"`
	CookiePrefix uint16   `json:"cookiePrefix"`
	Round        uint16   `json:"round"`
	Capabilities []string `json:"capabilities,omitempty"`
	LastError    string   `json:"lastError,omitempty"`
	// SyncMillis is how long the current incarnation took from the host's
	// Start call to its Synced: its whole initial flow installation.
	SyncMillis float64 `json:"syncMillis"`
}

// TableStatus is one row of GET /v1/tables.
type TableStatus struct {
	Pipeline string `json:"pipeline"`
	Stage    string `json:"stage"`
	Table    string `json:"table"`
	ID       uint8  `json:"id"`
	Owner    string `json:"owner"`
	Exported bool   `json:"exported"`
	Miss     string `json:"miss"`
	Flows    int    `json:"flows"`
}

// ResourceStatus is one row of GET /v1/resources: a shared resource
// (ct zone, bits of ct_mark, ct_label, pkt_mark or metadata, or an
// OpenFlow port) and who holds it.
type ResourceStatus struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Owner     string `json:"owner"`
	Value     uint32 `json:"value,omitempty"`
	Offset    uint8  `json:"offset"`
	Width     uint8  `json:"width,omitempty"`
	Published bool   `json:"published"`
}

// Resources reports every granted shared resource, by name.
func (a *Agent) Resources() []ResourceStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	gs := a.arb.Grants()
	out := make([]ResourceStatus, 0, len(gs))
	for _, n := range slices.Sorted(maps.Keys(gs)) {
		g := gs[n]
		out = append(out, ResourceStatus{Name: n, Kind: g.Kind.String(), Owner: g.Owner, Value: g.Value, Offset: g.Offset, Width: g.Width, Published: a.arb.Published(n)})
	}
	// OpenFlow ports are granted too: Value is the port number, Published
	// says every plugin may output to it.
	ports := a.arb.Ports()
	for _, no := range slices.Sorted(maps.Keys(ports)) {
		p := ports[no]
		out = append(out, ResourceStatus{Name: p.Name, Kind: "ofport", Owner: p.Owner, Value: no, Published: p.Exported})
	}
	return out
}

// Plugins reports every enabled plugin.
func (a *Agent) Plugins() []PluginStatus {
	a.pmu.Lock()
	order := append([]string(nil), a.order...)
	rs := map[string]*runner{}
	for n, r := range a.plugins {
		rs[n] = r
	}
	a.pmu.Unlock()
	out := make([]PluginStatus, 0, len(order))
	for _, n := range order {
		r := rs[n]
		if r == nil {
			continue
		}
		r.mu.Lock()
		s := PluginStatus{Name: n, State: r.state, Version: r.version, APIVersion: r.apiVersion, PID: r.pid, Restarts: r.restarts, LastError: r.lastErr,
			SyncMillis: float64(r.syncTook.Microseconds()) / 1000}
		for _, c := range r.caps {
			s.Capabilities = append(s.Capabilities, string(c))
		}
		r.mu.Unlock()
		a.mu.Lock()
		s.Flows = a.store.Count(n)
		if p, ok := a.arb.Plugin(n); ok {
			s.CookiePrefix, s.Round = p.Prefix, p.Round
		}
		a.mu.Unlock()
		out = append(out, s)
	}
	return out
}

// Tables reports the table layout.
func (a *Agent) Tables() []TableStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	counts := a.store.CountByTable()
	var out []TableStatus
	for _, t := range a.arb.Layout() {
		out = append(out, TableStatus{Pipeline: t.Pipeline.String(), Stage: t.Stage.String(), Table: t.Name, ID: t.ID,
			Owner: t.Owner, Exported: t.Exported, Miss: t.Miss.String(), Flows: counts[t.ID]})
	}
	return out
}

// Flows returns the canonical text of a plugin's flows.
func (a *Agent) Flows(owner string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, e := range a.store.Flows(owner) {
		out = append(out, e.R.String())
	}
	return out
}

// Handler serves the introspection API:
//
//	GET /v1/plugins              plugins, state, version, flow counts
//	GET /v1/tables               table layout: pipeline, stage, table, ID, owner
//	GET /v1/flows?plugin=NAME    a plugin's flows, canonical text
//	GET /v1/resources            ct zones, mark/label/metadata bits, ports: owner, value, published
//	POST /v1/trace               trace a packet through br-int's flows (TraceRequest → TraceResult)
//	GET /metrics                 Prometheus metrics (also on metrics.port)
//	GET /readyz, GET /livez      readiness (see NotReady) and liveness
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	a.healthRoutes(mux)
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
	}
	mux.Handle("GET /metrics", metrics.Handler(a.metrics.Registry))
	mux.HandleFunc("GET /v1/plugins", func(w http.ResponseWriter, _ *http.Request) { reply(w, a.Plugins()) })
	mux.HandleFunc("GET /v1/tables", func(w http.ResponseWriter, _ *http.Request) { reply(w, a.Tables()) })
	mux.HandleFunc("GET /v1/resources", func(w http.ResponseWriter, _ *http.Request) { reply(w, a.Resources()) })
	mux.HandleFunc("POST /v1/trace", func(w http.ResponseWriter, r *http.Request) {
		var req TraceRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, "trace request: "+err.Error(), http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), traceTimeout)
		defer cancel()
		res, err := a.Trace(ctx, req)
		switch {
		case errors.Is(err, errTrace):
			http.Error(w, err.Error(), http.StatusBadRequest)
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			reply(w, res)
		}
	})
	mux.HandleFunc("GET /v1/flows", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("plugin")
		if p == "" {
			http.Error(w, "missing ?plugin=NAME", http.StatusBadRequest)
			return
		}
		reply(w, a.Flows(p))
	})
	return mux
}

// ServeAPI serves Handler on <socketDir>/agent.sock until ctx ends.
func (a *Agent) ServeAPI(ctx context.Context, socketDir string) (string, error) {
	if err := os.MkdirAll(socketDir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(socketDir, "agent.sock")
	_ = os.Remove(path) // a stale socket from a previous run
	l, err := net.Listen("unix", path)
	if err != nil {
		return "", fmt.Errorf("introspection socket: %w", err)
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("introspection API stopped", "error", err)
		}
	}()
	return path, nil
}

// healthRoutes adds /readyz (200 "ok", or 503 listing what is missing, one
// line each) and /livez (200 while the agent serves at all: a wedged agent
// stops answering and kubelet restarts it).
func (a *Agent) healthRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		missing := a.NotReady()
		if len(missing) == 0 {
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		for _, m := range missing {
			_, _ = fmt.Fprintf(w, "not ready: %s\n", m)
		}
	})
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
}

// ServeHealth serves /readyz and /livez on a TCP address (kubelet's
// probes) until ctx ends; it returns the address it listens on.
func (a *Agent) ServeHealth(ctx context.Context, addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("health port: %w (set health.port to a free port, or 0 to serve health on the API socket only)", err)
	}
	mux := http.NewServeMux()
	a.healthRoutes(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("health endpoint stopped", "error", err)
		}
	}()
	return l.Addr().String(), nil
}
