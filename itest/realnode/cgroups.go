package realnode

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMounts returns the mount points of every cgroup hierarchy (each v1
// controller and the unified v2 one, when mounted).
func cgroupMounts() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && (f[2] == "cgroup" || f[2] == "cgroup2") {
			out = append(out, f[1])
		}
	}
	return out, nil
}

// makeCgroupRoot creates /<name> in every hierarchy: the kubelet's
// cgroupRoot, under which it puts its QoS classes and pods. cpuset starts
// empty in a new v1 cgroup, so it inherits the parent's CPUs and memory
// nodes; otherwise no task could join it.
func makeCgroupRoot(name string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		dir := filepath.Join(m, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("setting %s of %s: %w", f, dir, err)
				}
			}
		}
	}
	return nil
}

// killCgroupRoot SIGKILLs every task under /<name> in every hierarchy (pod
// processes outlive kubelet and containerd: shims reparent them) and then
// removes the cgroups, deepest first. It retries briefly while killed tasks
// are still exiting.
func killCgroupRoot(name string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var last error
	for attempt := 0; attempt < 50; attempt++ {
		last = nil
		for _, m := range mounts {
			root := filepath.Join(m, name)
			var dirs []string
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for _, d := range dirs {
				for _, f := range []string{"cgroup.procs", "tasks"} {
					b, err := os.ReadFile(filepath.Join(d, f))
					if err != nil {
						continue
					}
					for _, s := range strings.Fields(string(b)) {
						if pid, err := strconv.Atoi(s); err == nil {
							_ = syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
			}
			// Deepest first: a cgroup with children cannot be removed.
			sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
			for _, d := range dirs {
				if err := syscall.Rmdir(d); err != nil && !os.IsNotExist(err) {
					last = fmt.Errorf("removing cgroup %s: %w", d, err)
				}
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}
