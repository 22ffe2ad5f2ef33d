package ops

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// denyPort is the TCP port warden drops.
const denyPort = 9

// env is two nodes with podnet, tunnel and warden.
type env struct {
	cp     *controlplane.ControlPlane
	c      *cluster.Cluster
	agents map[string]*nodeagent.Agent
}

func start(t testenv.T) *env {
	t.Helper()
	if binsErr != nil {
		t.Fatalf("a binary the test runs did not build: %v", binsErr)
	}
	e := &env{agents: map[string]*nodeagent.Agent{}}
	e.cp = controlplane.Start(t)
	installCRDs(t, e.cp, "nodeagents", "traceflows")
	nb := nodeagent.Binaries{Agent: bins["switchyard-agent"], CNI: bins["switchyard-cni"],
		Plugins: map[string]string{"podnet": bins["podnet"], "tunnel": bins["tunnel"]}}
	e.c = cluster.Start(t, cluster.Options{Nodes: 2, Client: e.cp.Client,
		StartAgent: func(t testenv.T, n *cluster.Node) {
			e.agents[n.Name] = nodeagent.Start(t, n, nodeagent.Options{Bins: nb, ControlPlane: e.cp,
				Enabled: []string{"podnet", "tunnel"},
				Extra:   []nodeagent.Plugin{{Name: "warden", Path: bins["warden"], Config: fmt.Sprintf("{denyPort: %d}", denyPort)}}})
		}})
	for _, n := range e.c.Nodes {
		for _, p := range []string{"podnet", "tunnel", "warden"} {
			e.waitSynced(t, n, p)
		}
	}
	return e
}

func (e *env) waitSynced(t testenv.T, n *cluster.Node, plugin string) {
	t.Helper()
	a := e.agents[n.Name]
	err := testenv.Eventually(plugin+" synced on "+n.Name, 30*time.Second, 50*time.Millisecond, func() error {
		code, body, err := a.Get("/v1/plugins")
		if err != nil || code != 200 {
			return fmt.Errorf("GET /v1/plugins: %d %v", code, err)
		}
		var ps []struct{ Name, State string }
		if err := json.Unmarshal([]byte(body), &ps); err != nil {
			return err
		}
		for _, p := range ps {
			if p.Name == plugin && p.State == "synced" {
				return nil
			}
		}
		return fmt.Errorf("%s not synced: %s", plugin, body)
	})
	if err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, a.Process.Tail(40))
	}
}

// yardctl runs the yardctl binary against n's agent; it returns stdout,
// stderr and the exit code.
func (e *env) yardctl(t testenv.T, n *cluster.Node, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bins["yardctl"], append([]string{"--socket", e.agents[n.Name].APISocket}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("yardctl %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// scrape reads n's agent's /metrics and parses it as Prometheus does.
func (e *env) scrape(t testenv.T, n *cluster.Node) map[string]*dto.MetricFamily {
	t.Helper()
	code, body, err := e.agents[n.Name].Get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("%s: GET /metrics: %d %v", n.Name, code, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s: /metrics does not parse as the Prometheus text format: %v\n%s", n.Name, err, body)
	}
	return fams
}

// value is the value of the sample of family name whose labels include
// want (counter, gauge, or a histogram's sample count); ok is false if
// there is none.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-want +got; -update rewrites it):\n%s", name, d)
	}
}
