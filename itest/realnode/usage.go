package realnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Usage is what a set of processes has cost: CPU time since they started
// and resident memory now.
type Usage struct {
	CPU time.Duration
	RSS uint64 // bytes
}

// Add sums two usages.
func (u Usage) Add(o Usage) Usage { return Usage{CPU: u.CPU + o.CPU, RSS: u.RSS + o.RSS} }

// PodUsage reads a pod's cgroup under its node's cgroupRoot (cgroup v1,
// the kubelet's cgroupfs layout): the CPU time all its containers used
// (cpuacct.usage) and their resident memory (total_rss of memory.stat).
// Shims are not in it: they run in containerd's cgroup.
func (c *Cluster) PodUsage(p *corev1.Pod) (Usage, error) {
	n := c.node(p.Spec.NodeName)
	if n == nil {
		return Usage{}, fmt.Errorf("pod %s/%s is on %q, not one of the harness's nodes", p.Namespace, p.Name, p.Spec.NodeName)
	}
	cpuDir, err := podCgroup("cpuacct", n.CgroupRoot, string(p.UID))
	if err != nil {
		return Usage{}, err
	}
	memDir, err := podCgroup("memory", n.CgroupRoot, string(p.UID))
	if err != nil {
		return Usage{}, err
	}
	ns, err := readUint(filepath.Join(cpuDir, "cpuacct.usage"))
	if err != nil {
		return Usage{}, err
	}
	stat, err := os.ReadFile(filepath.Join(memDir, "memory.stat"))
	if err != nil {
		return Usage{}, err
	}
	u := Usage{CPU: time.Duration(ns)}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "total_rss "); ok {
			u.RSS, _ = strconv.ParseUint(v, 10, 64)
		}
	}
	return u, nil
}

// PodProcesses is the CPU time of each process in a pod's cgroup since
// it started, by pid, with its command name (the first word of its
// command line, base name: the plugin binaries all run as "plugin"
// otherwise).
func (c *Cluster) PodProcesses(p *corev1.Pod) (map[int]Process, error) {
	n := c.node(p.Spec.NodeName)
	if n == nil {
		return nil, fmt.Errorf("pod %s/%s is on %q, not one of the harness's nodes", p.Namespace, p.Name, p.Spec.NodeName)
	}
	dir, err := podCgroup("cpuacct", n.CgroupRoot, string(p.UID))
	if err != nil {
		return nil, err
	}
	out := map[int]Process{}
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			st, err := procStat(pid)
			if err != nil {
				continue
			}
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			name, _, _ := strings.Cut(string(cmd), "\x00")
			out[pid] = Process{Name: filepath.Base(name), CPU: st.cpu}
		}
		return nil
	})
	return out, err
}

// Process is one process's name and CPU time.
type Process struct {
	Name string
	CPU  time.Duration
}

// podCgroup finds the pod's directory (pod<UID>, under its QoS class)
// below the node's cgroupRoot in the v1 hierarchy that holds controller.
func podCgroup(controller, root, uid string) (string, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return "", err
	}
	for _, m := range mounts {
		if !strings.Contains(filepath.Base(m), controller) {
			continue
		}
		var found string
		_ = filepath.WalkDir(filepath.Join(m, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && d.Name() == "pod"+uid {
				found = p
				return filepath.SkipAll
			}
			return nil
		})
		if found != "" {
			return found, nil
		}
		return "", fmt.Errorf("no cgroup pod%s under %s", uid, filepath.Join(m, root))
	}
	return "", fmt.Errorf("no v1 %s hierarchy mounted", controller)
}

// DaemonUsage is the cost of a node's kubelet and containerd (each
// process tree as the harness started it).
func (n *Node) DaemonUsage() (kubelet, containerd Usage, err error) {
	if kubelet, err = treeUsage(n.kubelet.Pid()); err != nil {
		return
	}
	containerd, err = treeUsage(n.containerd.Pid())
	return
}

// treeUsage sums utime+stime and VmRSS of pid and its descendants.
func treeUsage(pid int) (Usage, error) {
	children := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return Usage{}, err
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procStat(p); err == nil {
			children[st.ppid] = append(children[st.ppid], p)
		}
	}
	var u Usage
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[0]
		todo = append(todo[1:], children[p]...)
		st, err := procStat(p)
		if err != nil {
			if p == pid {
				return Usage{}, err
			}
			continue // exited meanwhile
		}
		u.CPU += st.cpu
		u.RSS += st.rss
	}
	return u, nil
}

type pstat struct {
	ppid int
	cpu  time.Duration
	rss  uint64
}

// clockTick is USER_HZ, 100 on every Linux architecture Go supports here.
const clockTick = 100

// procStat reads /proc/<pid>/stat: the fields after the command name
// (which may hold spaces, hence the last ')').
func procStat(pid int) (pstat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return pstat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return pstat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is state (field 3): ppid is field 4, utime 14, stime 15, rss 24.
	if len(f) < 22 {
		return pstat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	pages, _ := strconv.ParseUint(f[21], 10, 64)
	return pstat{ppid: ppid, cpu: time.Duration(ut+st) * time.Second / clockTick, rss: pages * uint64(os.Getpagesize())}, nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}
