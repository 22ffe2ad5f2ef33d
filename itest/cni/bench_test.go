package cni

import (
	"context"
	"fmt"
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
// bridge + host-local plugins of containernetworking/plugins, on the same
// machine in the same run. Run with -benchtime=1x -count=N and compare the
// medians of the reported metrics.
func BenchmarkCNI(b *testing.B) {
	testenv.RequireRoot(b)
	b.Run("bridge", func(b *testing.B) {
		ref, err := upstream.EnsureCNIPlugins(b.Logf)
		if err != nil {
			b.Fatal(err)
		}
		node := netns.Create(b, testenv.Name("bbn"))
		dir := testenv.Dir(b, "bb")
		conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"bench","plugins":[{"type":"bridge","bridge":"syb0","isGateway":true,
			"ipam":{"type":"host-local","subnet":"10.99.0.0/16","dataDir":%q}}]}`, filepath.Join(dir, "ipam"))
		list, err := libcni.NetworkConfFromBytes([]byte(conf))
		if err != nil {
			b.Fatal(err)
		}
		cfg := libcni.NewCNIConfigWithCacheDir([]string{ref}, filepath.Join(dir, "cache"), nil)
		benchRounds(b, node, list, cfg, nil)
	})
	b.Run("switchyard", func(b *testing.B) {
		needBins(b)
		c := cluster.Start(b, cluster.Options{Nodes: 1, StartAgent: startAgent})
		n := c.Nodes[0]
		list, err := loadList(n)
		if err != nil {
			b.Fatal(err)
		}
		cfg := libcni.NewCNIConfigWithCacheDir([]string{n.CNIBinDir}, filepath.Join(n.Dir, "bench-cache"), nil)
		benchRounds(b, n.NetNS, list, cfg, func() (float64, float64) { return agentRSSMB(b, n) })
	})
}

func benchRounds(b *testing.B, node string, list *libcni.NetworkConfigList, cfg *libcni.CNIConfig, rss func() (float64, float64)) {
	pods := make([]string, benchPods)
	for i := range pods {
		pods[i] = netns.Create(b, testenv.Name(fmt.Sprintf("bp%d", i)))
	}
	rt := func(i int) *libcni.RuntimeConf {
		return &libcni.RuntimeConf{ContainerID: fmt.Sprintf("bench-%s-%d", testenv.RunID(), i), NetNS: netns.Path(pods[i]), IfName: "eth0",
			Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "bench"}, {"K8S_POD_NAME", fmt.Sprintf("p%d", i)}}}
	}
	var adds, dels []time.Duration
	var agentMB, pluginsMB float64
	b.ResetTimer()
	for range b.N {
		for i := range pods {
			start := time.Now()
			err := netns.Do(node, func() error {
				_, err := cfg.AddNetworkList(context.Background(), list, rt(i))
				return err
			})
			adds = append(adds, time.Since(start))
			if err != nil {
				b.Fatalf("ADD pod %d: %v", i, err)
			}
		}
		if rss != nil {
			agentMB, pluginsMB = rss()
		}
		for i := range pods {
			start := time.Now()
			err := netns.Do(node, func() error { return cfg.DelNetworkList(context.Background(), list, rt(i)) })
			dels = append(dels, time.Since(start))
			if err != nil {
				b.Fatalf("DEL pod %d: %v", i, err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(pct(adds, 50)), "add-p50-ms")
	b.ReportMetric(ms(pct(adds, 99)), "add-p99-ms")
	b.ReportMetric(float64(len(adds))/sum(adds).Seconds(), "add-pods/s")
	b.ReportMetric(ms(pct(dels, 50)), "del-p50-ms")
	b.ReportMetric(ms(pct(dels, 99)), "del-p99-ms")
	if rss != nil {
		b.ReportMetric(agentMB, "agent-rss-MB")
		b.ReportMetric(pluginsMB, "plugins-rss-MB")
	}
	b.ReportMetric(0, "ns/op")
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
