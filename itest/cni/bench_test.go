package cni

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/itest/upstream"
)

const benchPods = 100

// BenchmarkCNI measures sequential ADD and DEL of 100 pods through
// switchyard (thin binary → agent → podnet) and through the reference
// bridge + host-local plugins of containernetworking/plugins v1.10.0, on
// the same machine in the same run. The two are interleaved pod by pod
// (alternating which goes first), so a noisy neighbour slows both alike,
// each starts on a quiet switch (settle), and the ratios are reported
// next to the absolute figures. Run with
// -benchtime=1x -count=N and take the medians.
func BenchmarkCNI(b *testing.B) { benchCNI(b, startAgent) }

// BenchmarkCNIWarm is BenchmarkCNI with podnet keeping 4 warm ports
// (warmPorts: 4): an ADD takes a pair attached before it asked, and the
// pool refills while the next pods are added.
func BenchmarkCNIWarm(b *testing.B) {
	benchCNI(b, agentStarter(agentOptions{podnet: map[string]any{"warmPorts": 4}}))
}

func benchCNI(b *testing.B, startAgent func(testenv.T, *cluster.Node)) {
	testenv.RequireRoot(b)
	needBins(b)
	ref, err := upstream.EnsureCNIPlugins(b.Logf)
	if err != nil {
		b.Fatal(err)
	}
	// Reference: a Linux bridge in its own node namespace.
	brNode := netns.Create(b, testenv.Name("bbn"))
	dir := testenv.Dir(b, "bb")
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"bench","plugins":[{"type":"bridge","bridge":"syb0","isGateway":true,
		"ipam":{"type":"host-local","subnet":"10.99.0.0/16","dataDir":%q}}]}`, filepath.Join(dir, "ipam"))
	brList, err := libcni.NetworkConfFromBytes([]byte(conf))
	if err != nil {
		b.Fatal(err)
	}
	bridge := &benchEnv{name: "bridge", node: brNode, list: brList,
		cfg: libcni.NewCNIConfigWithCacheDir([]string{ref}, filepath.Join(dir, "cache"), nil)}

	c := cluster.Start(b, cluster.Options{Nodes: 1, StartAgent: startAgent})
	n := c.Nodes[0]
	syList, err := loadList(n)
	if err != nil {
		b.Fatal(err)
	}
	sy := &benchEnv{name: "sy", node: n.NetNS, list: syList,
		cfg: libcni.NewCNIConfigWithCacheDir([]string{n.CNIBinDir}, filepath.Join(n.Dir, "bench-cache"), nil)}
	sy.diag = func() string {
		vs, _ := os.ReadFile(filepath.Join(n.OVS.Dir, "ovs-vswitchd.log"))
		return fmt.Sprintf("ovs-vswitchd log tail:\n%s\nagent log tail:\n%s", tail(string(vs), 30), agentOf(b, n).Process.Tail(30))
	}
	for _, e := range []*benchEnv{bridge, sy} {
		e.pods = make([]string, benchPods)
		for i := range e.pods {
			e.pods[i] = netns.Create(b, testenv.Name(fmt.Sprintf("%.2s%d", e.name, i)))
		}
	}
	var agentMB, pluginsMB float64
	// What the switch spends per pod: ovs-vswitchd's CPU over the ADDs,
	// then over the DELs (only switchyard's side uses it). On the
	// userspace datapath it grows with the ports on the bridge.
	var switchAdd, switchDel time.Duration
	b.ResetTimer()
	for range b.N {
		c0 := procCPU(b, n.OVS.VswitchdPid())
		for i := range benchPods {
			for _, e := range order(i, bridge, sy) {
				settle(b, n.OVS.VswitchdPid())
				e.add(b, i)
			}
		}
		c1 := procCPU(b, n.OVS.VswitchdPid())
		agentMB, pluginsMB = agentRSSMB(b, n)
		for i := range benchPods {
			for _, e := range order(i, bridge, sy) {
				settle(b, n.OVS.VswitchdPid())
				e.del(b, i)
			}
		}
		switchAdd += c1 - c0
		switchDel += procCPU(b, n.OVS.VswitchdPid()) - c1
	}
	b.StopTimer()
	for _, e := range []*benchEnv{bridge, sy} {
		b.ReportMetric(ms(pct(e.adds, 50)), e.name+"-add-p50-ms")
		b.ReportMetric(ms(pct(e.adds, 99)), e.name+"-add-p99-ms")
		b.ReportMetric(float64(len(e.adds))/sum(e.adds).Seconds(), e.name+"-add-pods/s")
		b.ReportMetric(ms(pct(e.dels, 50)), e.name+"-del-p50-ms")
		b.ReportMetric(ms(pct(e.dels, 99)), e.name+"-del-p99-ms")
	}
	b.ReportMetric(float64(pct(sy.adds, 50))/float64(pct(bridge.adds, 50)), "add-p50-ratio")
	b.ReportMetric(float64(pct(sy.dels, 50))/float64(pct(bridge.dels, 50)), "del-p50-ratio")
	// Where an ADD's time goes: podnet's phases and the agent's whole
	// handling (from the agent log), and the rest of the path (runtime →
	// libcni → thin binary → gRPC) as the difference to the client's p50.
	phases := addPhases(b, agentOf(b, n).Process.LogPath)
	// How many ADDs took a warm port (BenchmarkCNIWarm): the rest found
	// the pool empty and made their own.
	b.ReportMetric(float64(len(phases["podnet-adopt"]))/float64(b.N*benchPods), "sy-warm-share")
	for _, name := range slices.Sorted(maps.Keys(phases)) {
		b.ReportMetric(ms(pct(phases[name], 50)), "sy-"+name+"-p50-ms")
	}
	if agent := phases["agent"]; len(agent) > 0 {
		b.ReportMetric(ms(pct(sy.adds, 50)-pct(agent, 50)), "sy-outside-agent-p50-ms")
	}
	b.ReportMetric(ms(switchAdd)/float64(b.N*benchPods), "sy-vswitchd-cpu-ms/add")
	b.ReportMetric(ms(switchDel)/float64(b.N*benchPods), "sy-vswitchd-cpu-ms/del")
	b.ReportMetric(agentMB, "agent-rss-MB")
	b.ReportMetric(pluginsMB, "plugins-rss-MB")
	b.ReportMetric(0, "ns/op")
}

// addPhases reads the agent log: per ADD, podnet's phases, each
// "podnet-<phase>", and the agent's whole handling ("agent", the CNI
// server's "took"). The phases, in order: ipam, veth (the pair
// created), configure (the pod end's addresses and routes, while OVSDB
// takes the port), ovs_port (what is left of that), flows, attach
// (ovs-vswitchd), garp; an ADD on a warm port has ipam, adopt (the
// parked pod end moved in and configured), flows and garp.
func addPhases(b *testing.B, logPath string) map[string][]time.Duration {
	raw, err := os.ReadFile(logPath)
	if err != nil {
		b.Fatal(err)
	}
	return phasesIn(string(raw))
}

// phasesIn parses agent log text for addPhases.
func phasesIn(raw string) map[string][]time.Duration {
	dur := func(v any) (time.Duration, bool) {
		switch v := v.(type) {
		case string:
			d, err := time.ParseDuration(v)
			return d, err == nil
		case float64:
			return time.Duration(v), true
		}
		return 0, false
	}
	out := map[string][]time.Duration{}
	for _, line := range strings.Split(raw, "\n") {
		if !strings.Contains(line, `"pod attached"`) {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if d, ok := dur(m["took"]); ok {
			out["agent"] = append(out["agent"], d)
			continue
		}
		for _, ph := range []string{"ipam", "veth", "configure", "ovs_port", "adopt", "flows", "attach", "garp"} {
			if d, ok := dur(m[ph]); ok {
				out["podnet-"+ph] = append(out["podnet-"+ph], d)
			}
		}
	}
	return out
}

// benchEnv is one CNI network with its pod namespaces and measurements.
type benchEnv struct {
	name       string
	node       string
	list       *libcni.NetworkConfigList
	cfg        *libcni.CNIConfig
	pods       []string
	adds, dels []time.Duration
	diag       func() string // what to show when an operation fails
}

func (e *benchEnv) fail(b *testing.B, op string, i int, err error) {
	msg := ""
	if e.diag != nil {
		msg = e.diag()
	}
	b.Fatalf("%s %s pod %d: %v\n%s", e.name, op, i, err, msg)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func order(i int, a, b *benchEnv) []*benchEnv {
	if i%2 == 0 {
		return []*benchEnv{a, b}
	}
	return []*benchEnv{b, a}
}

func (e *benchEnv) rt(i int) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: fmt.Sprintf("bench-%s-%s-%d", testenv.RunID(), e.name, i), NetNS: netns.Path(e.pods[i]), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "bench"}, {"K8S_POD_NAME", fmt.Sprintf("p%d", i)}}}
}

// add and del run the plugin from the node's namespace, as the runtime on
// that node would.
func (e *benchEnv) add(b *testing.B, i int) {
	start := time.Now()
	err := netns.Do(e.node, func() error {
		_, err := e.cfg.AddNetworkList(context.Background(), e.list, e.rt(i))
		return err
	})
	e.adds = append(e.adds, time.Since(start))
	if err != nil {
		e.fail(b, "ADD", i, err)
	}
}

func (e *benchEnv) del(b *testing.B, i int) {
	start := time.Now()
	err := netns.Do(e.node, func() error { return e.cfg.DelNetworkList(context.Background(), e.list, e.rt(i)) })
	e.dels = append(e.dels, time.Since(start))
	if err != nil {
		e.fail(b, "DEL", i, err)
	}
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	idx := (len(s)*p + 99) / 100
	if idx > 0 {
		idx--
	}
	return s[idx]
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rssMB reads VmRSS of a process in MiB.
func rssMB(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// settle waits until ovs-vswitchd's main thread has been quiet for
// settleWindow (at most settleMax), so each timed ADD or DEL starts on a
// quiet switch: neither side pays for work the other left running (the
// switch finishing a DEL, or podnet refilling its warm ports, which starts
// warm.refillQuiet after an ADD, so the window is longer than that).
func settle(b *testing.B, pid int) {
	deadline := time.Now().Add(settleMax)
	last, err := mainThreadCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	for time.Now().Before(deadline) {
		time.Sleep(settleWindow)
		now, err := mainThreadCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		if now-last < settleWindow/20 {
			return
		}
		last = now
	}
}

const (
	settleWindow = 50 * time.Millisecond
	settleMax    = time.Second
)

// mainThreadCPU is the time the thread group leader of pid (ovs-vswitchd's
// main loop) has run, in nanoseconds (/proc/pid/schedstat's first field:
// /proc/pid/stat counts in 10 ms ticks, too coarse here).
func mainThreadCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0, fmt.Errorf("/proc/%d/schedstat is empty", pid)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns), err
}

// procCPU is the user and system CPU time process pid has used so far.
func procCPU(b *testing.B, pid int) time.Duration {
	d, err := testenv.ProcCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return d
}
