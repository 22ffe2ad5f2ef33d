package realnode_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"switchyard.dev/switchyard/itest/realnode"
)

// BenchmarkPodStartup: from Deployment create until 30 agnhost pods are
// Running with an IP, spread over two real nodes, first with the bridge +
// host-local reference plugins, then, on the same kubelets, with
// Switchyard installed from switchyard.yml; both called by containerd.
// Reports each in seconds and ours/reference (target ≤ 1.2).
//
// It also reports what each window cost, to tell where a difference comes
// from on a machine whose two cores the whole cluster shares: the CPU
// seconds kubelet + containerd (both nodes) and Switchyard's pods (agents,
// OVS, controller) used during each startup, the machine's busy share, and,
// idle before ours, each component's CPU per minute and memory per node.
func BenchmarkPodStartup(b *testing.B) {
	c := realnode.Start(b, realnode.Options{Nodes: 2, Images: realnode.ProductImages(b)})
	c.InstallReferenceCNI(b)
	waitReady(b, c)
	const replicas = 30
	b.ResetTimer()
	var ref, ours time.Duration
	refCost, oursCost := costs{}, costs{}
	for i := 0; i < b.N; i++ {
		before := snapshot(b, c)
		ref += c.DeploymentStartup(b, "default", realnode.AgnhostDeployment("startup-ref", replicas, "pause"), 5*time.Minute)
		refCost = refCost.add(snapshot(b, c).since(before))
	}
	b.StopTimer()
	// Same kubelets, our CNI: the reference conflist goes, ours comes
	// with the manifests (install-cni), and the nodes turn Ready again.
	c.RemoveCNI(b)
	c.Apply(b, realnode.Manifest(b))
	if err := c.WaitSystemReady("kube-system", 180*time.Second); err != nil {
		b.Fatalf("%v\nkube-system:\n%s", err, c.Describe("kube-system", 10))
	}
	waitReady(b, c)
	// Idle cost, after the install has settled.
	time.Sleep(10 * time.Second)
	idleFrom := snapshot(b, c)
	time.Sleep(30 * time.Second)
	idle := snapshot(b, c)
	perMin := func(d time.Duration) float64 {
		return float64(d.Milliseconds()) / idle.at.Sub(idleFrom.at).Minutes() / float64(len(c.Nodes))
	}
	d := idle.since(idleFrom)
	b.ReportMetric(perMin(d.daemons.CPU), "idle-kubelet+containerd-cpu-ms/min/node")
	b.ReportMetric(perMin(d.switchyard.CPU), "idle-switchyard-cpu-ms/min/node")
	b.ReportMetric(float64(idle.daemons.RSS)/float64(len(c.Nodes))/(1<<20), "kubelet+containerd-MiB/node")
	b.ReportMetric(float64(idle.switchyard.RSS)/float64(len(c.Nodes))/(1<<20), "switchyard-MiB/node")
	b.StartTimer()
	for i := 0; i < b.N; i++ {
		before := snapshot(b, c)
		ours += c.DeploymentStartup(b, "default", realnode.AgnhostDeployment("startup-sy", replicas, "pause"), 5*time.Minute)
		oursCost = oursCost.add(snapshot(b, c).since(before))
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(ref.Seconds()/n, "ref-s/30pods")
	b.ReportMetric(ours.Seconds()/n, "switchyard-s/30pods")
	b.ReportMetric(ours.Seconds()/ref.Seconds(), "ours/ref")
	b.ReportMetric(refCost.daemons.CPU.Seconds()/n, "ref-kubelet+containerd-cpu-s")
	b.ReportMetric(oursCost.daemons.CPU.Seconds()/n, "switchyard-kubelet+containerd-cpu-s")
	b.ReportMetric(oursCost.switchyard.CPU.Seconds()/n, "switchyard-pods-cpu-s")
	b.ReportMetric(refCost.busy(), "ref-machine-busy")
	b.ReportMetric(oursCost.busy(), "switchyard-machine-busy")
	b.Logf("switchyard pods' CPU during startup, by pod: %v", oursCost.byPod)
	b.Logf("switchyard processes' CPU during startup (name/pid@node): %s", topProcesses(oursCost.byProcess, 12))
	b.Logf("switchyard processes' CPU while idle, %s: %s", idle.at.Sub(idleFrom.at).Round(time.Second), topProcesses(d.byProcess, 12))
}

// costs is a snapshot of cumulative costs, or (from since) the difference
// of two.
type costs struct {
	at                  time.Time
	daemons, switchyard realnode.Usage
	byPod               map[string]time.Duration
	// byProcess is keyed name/pid@node: a process that started within a
	// window counts from zero.
	byProcess map[string]time.Duration
	// machineBusy and machineAll are /proc/stat's busy and total CPU time.
	machineBusy, machineAll time.Duration
}

func snapshot(b *testing.B, c *realnode.Cluster) costs {
	b.Helper()
	s := costs{at: time.Now(), byPod: map[string]time.Duration{}, byProcess: map[string]time.Duration{}}
	for _, n := range c.Nodes {
		k, cd, err := n.DaemonUsage()
		if err != nil {
			b.Fatalf("%s: %v", n.Name, err)
		}
		s.daemons = s.daemons.Add(k).Add(cd)
	}
	pods, err := c.CP.Client.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app=switchyard"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" {
			continue
		}
		u, err := c.PodUsage(p)
		if err != nil {
			continue // not started yet, or none (the reference run)
		}
		s.switchyard = s.switchyard.Add(u)
		s.byPod[p.Labels["component"]+"@"+p.Spec.NodeName] = u.CPU
		procs, _ := c.PodProcesses(p)
		for pid, pr := range procs {
			s.byProcess[fmt.Sprintf("%s/%d@%s", pr.Name, pid, p.Spec.NodeName)] = pr.CPU
		}
	}
	s.machineBusy, s.machineAll = machineCPU(b)
	return s
}

// since is s minus an earlier snapshot; memory is s's.
func (s costs) since(o costs) costs {
	d := costs{at: s.at, byPod: map[string]time.Duration{},
		daemons:     realnode.Usage{CPU: s.daemons.CPU - o.daemons.CPU, RSS: s.daemons.RSS},
		switchyard:  realnode.Usage{CPU: s.switchyard.CPU - o.switchyard.CPU, RSS: s.switchyard.RSS},
		machineBusy: s.machineBusy - o.machineBusy, machineAll: s.machineAll - o.machineAll}
	for k, v := range s.byPod {
		d.byPod[k] = v - o.byPod[k]
	}
	d.byProcess = map[string]time.Duration{}
	for k, v := range s.byProcess {
		d.byProcess[k] = v - o.byProcess[k]
	}
	return d
}

// add sums window costs over iterations.
func (s costs) add(o costs) costs {
	out := costs{byPod: map[string]time.Duration{}, daemons: s.daemons.Add(o.daemons), switchyard: s.switchyard.Add(o.switchyard),
		machineBusy: s.machineBusy + o.machineBusy, machineAll: s.machineAll + o.machineAll}
	for k, v := range s.byPod {
		out.byPod[k] += v
	}
	for k, v := range o.byPod {
		out.byPod[k] += v
	}
	out.byProcess = map[string]time.Duration{}
	for _, m := range []map[string]time.Duration{s.byProcess, o.byProcess} {
		for k, v := range m {
			out.byProcess[k] += v
		}
	}
	return out
}

// busy is the share of the machine's CPU time that was busy (0..1).
func (s costs) busy() float64 {
	if s.machineAll == 0 {
		return 0
	}
	return float64(s.machineBusy) / float64(s.machineAll)
}

// machineCPU reads the first line of /proc/stat: busy (all but idle and
// iowait) and total CPU time of every core.
func machineCPU(b *testing.B) (busy, all time.Duration) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		b.Fatalf("/proc/stat starts %q", line)
	}
	var idle uint64
	for i, v := range f[1:] {
		x, _ := strconv.ParseUint(v, 10, 64)
		all += time.Duration(x) * 10 * time.Millisecond // USER_HZ 100
		if i == 3 || i == 4 {                           // idle, iowait
			idle += x
		}
	}
	return all - time.Duration(idle)*10*time.Millisecond, all
}

// topProcesses lists the n largest, largest first.
func topProcesses(m map[string]time.Duration, n int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Compare(m[b], m[a]) })
	var out []string
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%s %s", k, m[k].Round(10*time.Millisecond)))
	}
	return strings.Join(out, ", ")
}

func waitReady(b *testing.B, c *realnode.Cluster) {
	b.Helper()
	for _, n := range c.Nodes {
		if err := c.WaitNode(n.Name, realnode.Ready(true), 180*time.Second); err != nil {
			b.Fatalf("%v\nkube-system:\n%s", err, c.Describe("kube-system", 10))
		}
	}
}
