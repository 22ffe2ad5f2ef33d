package tunnel

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/nodeagent"
	"switchyard.dev/switchyard/itest/probe"
	"switchyard.dev/switchyard/itest/testenv"
)

// env is a running cluster with podnet and tunnel on every node.
type env struct {
	cp     *controlplane.ControlPlane
	c      *cluster.Cluster
	agents map[string]*nodeagent.Agent
	bins   map[string]string
}

// opts configure start.
type opts struct {
	nodes     int
	dualStack bool
	// tunnel is tunnel's config section (e.g. type: vxlan).
	tunnel map[string]any
	// extra plugins on every node (benchmarks need none).
	logLevel string
}

func start(t testenv.T, o opts) *env {
	t.Helper()
	e := &env{agents: map[string]*nodeagent.Agent{}}
	if binsErr != nil {
		t.Fatalf("a binary the test runs did not build: %v", binsErr)
	}
	e.bins = bins
	e.cp = controlplane.Start(t)
	nb := nodeagent.Binaries{Agent: e.bins["switchyard-agent"], CNI: e.bins["switchyard-cni"],
		Plugins: map[string]string{"podnet": e.bins["podnet"], "tunnel": e.bins["tunnel"]}}
	e.c = cluster.Start(t, cluster.Options{Nodes: o.nodes, Client: e.cp.Client, DualStack: o.dualStack,
		StartAgent: func(t testenv.T, n *cluster.Node) {
			e.agents[n.Name] = nodeagent.Start(t, n, nodeagent.Options{Bins: nb, ControlPlane: e.cp,
				Enabled: []string{"podnet", "tunnel"}, LogLevel: o.logLevel,
				Config: map[string]map[string]any{"tunnel": o.tunnel}})
		}})
	for _, n := range e.c.Nodes {
		e.waitSynced(t, n)
	}
	return e
}

// plugin returns the agent's view of one plugin on n.
func (e *env) plugin(t testenv.T, n *cluster.Node, name string) (state string, pid, restarts int) {
	t.Helper()
	code, body, err := e.agents[n.Name].Get("/v1/plugins")
	if err != nil || code != 200 {
		t.Fatalf("%s: GET /v1/plugins: %d %v %s", n.Name, code, err, body)
	}
	var ps []struct {
		Name     string `json:"name"`
		State    string `json:"state"`
		PID      int    `json:"pid"`
		Restarts int    `json:"restarts"`
	}
	if err := json.Unmarshal([]byte(body), &ps); err != nil {
		t.Fatalf("%s: /v1/plugins: %v", n.Name, err)
	}
	for _, p := range ps {
		if p.Name == name {
			return p.State, p.PID, p.Restarts
		}
	}
	// Not started yet: the agent starts plugins in config order.
	return "not listed", 0, 0
}

func (e *env) waitSynced(t testenv.T, n *cluster.Node) {
	t.Helper()
	err := testenv.Eventually("tunnel synced on "+n.Name, 30*time.Second, 50*time.Millisecond, func() error {
		if s, _, _ := e.plugin(t, n, "tunnel"); s != "synced" {
			return fmt.Errorf("tunnel is %s", s)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nagent log:\n%s", err, e.agents[n.Name].Process.Tail(40))
	}
}

// peerFlows are the lines of n's br-int naming tun_dst=ip.
func peerFlows(t testenv.T, n *cluster.Node, ip net.IP) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(n.OVS.Ofctl(t, "-O", "OpenFlow15", "dump-flows", "br-int"), "\n") {
		if strings.Contains(l, "tun_dst") && strings.Contains(l, "->tun_dst") && strings.Contains(l, ip.String()+"->tun_dst") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// routeTo is n's `ip route` line for cidr ("" if none).
func routeTo(t testenv.T, n *cluster.Node, cidr *net.IPNet) string {
	t.Helper()
	fam := "-4"
	if cidr.IP.To4() == nil {
		fam = "-6"
	}
	out, err := n.Exec("ip", fam, "route", "show", cidr.String())
	if err != nil {
		t.Fatalf("%s: ip route: %v", n.Name, err)
	}
	return strings.TrimSpace(out)
}

// pods adds one pod per node, named prefix-<index>, and serves the probe
// port in each.
func (e *env) pods(t testenv.T, prefix string, nodes []*cluster.Node) []*cluster.Pod {
	t.Helper()
	var ps []*cluster.Pod
	for _, n := range nodes {
		p := e.c.AddPod(t, cluster.PodSpec{Name: fmt.Sprintf("%s-%d", prefix, n.Index), Namespace: "tun", Node: n})
		probe.Serve(t, p.NetNS, port)
		ps = append(ps, p)
	}
	return ps
}

const port = 8080

// matrix checks every pair for every protocol and fails with the table.
func matrix(t *testing.T, from, to []probe.Endpoint, want bool, protos ...probe.Protocol) {
	t.Helper()
	for _, proto := range protos {
		m := probe.Run(from, to, proto, port, probe.MatrixOptions{SkipSelf: true, Timeout: 2 * time.Second})
		if d := m.Diff(probe.Expect(from, to, want, true)); d != "" {
			t.Errorf("%s connectivity differs (got!want):\n%s\nmatrix:\n%s", proto, d, m)
		} else {
			t.Logf("%s:\n%s", proto, m)
		}
	}
}

func podEndpoints(ps []*cluster.Pod, v6 bool) []probe.Endpoint {
	var eps []probe.Endpoint
	for _, p := range ps {
		ip := p.IP()
		if v6 {
			ip = nil
			for _, a := range p.IPs {
				if a.To4() == nil {
					ip = a
				}
			}
		}
		eps = append(eps, probe.Endpoint{Name: p.Name, NetNS: p.NetNS, IP: ip})
	}
	return eps
}

// whoami serves, on port in ns, each TCP client its own source address as
// the server sees it, then closes.
func whoami(t testenv.T, ns string, port int) {
	t.Helper()
	l, err := netns.Listen(ns, "tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		t.Fatalf("%v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			fmt.Fprintln(c, host)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
}

// seenAs dials ip:port from ns and returns the source address the whoami
// server saw.
func seenAs(ns string, ip net.IP, port int) (string, error) {
	c, err := netns.Dial(ns, "tcp", net.JoinHostPort(ip.String(), fmt.Sprint(port)), 3*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(c)
	return strings.TrimSpace(string(b)), err
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}
