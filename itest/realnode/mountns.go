package realnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"switchyard.dev/switchyard/itest/testenv"
)

// HostPaths are the fixed host paths that CNI plugins, OVS and the agent
// DaemonSets use and that kubelet and containerd keep state in. Inside a
// node's mount namespace each is a bind mount of a node-private directory.
var HostPaths = []string{
	"/opt/cni/bin", "/etc/cni/net.d", "/var/lib/cni",
	"/run/netns",
	"/var/lib/kubelet", "/var/log/pods", "/var/log/containers",
	"/run/openvswitch", "/etc/openvswitch", "/var/lib/openvswitch", "/var/log/openvswitch",
	"/run/switchyard", "/var/lib/switchyard", "/var/log/switchyard",
	"/run/containerd", "/var/lib/containerd", "/opt/containerd",
	// Mounted (read-only) by OVS DaemonSets for modprobe; this machine has
	// no /lib/modules at all, so a node gets an empty one.
	"/lib/modules",
}

// mountNS is a persistent mount namespace: its nsfs file is bind-mounted
// at File, on a private mount of its own directory (the kernel refuses to
// keep a mount namespace's file on a mount that propagates into it).
type mountNS struct {
	Dir  string // private mount holding File
	File string
	// Private maps each of HostPaths to the node-private directory seen
	// there inside the namespace.
	Private map[string]string
}

// newMountNS creates the namespace under dir, a slave of the host's mount
// namespace, with HostPaths bound to directories under dir/fs, and its root
// made rshared inside, as on a systemd host, so that kubelet's and
// containerd's mounts (volumes, pod netns) reach containers that ask for
// HostToContainer propagation.
func newMountNS(dir string) (*mountNS, error) {
	m := &mountNS{Dir: filepath.Join(dir, "mntns"), Private: map[string]string{}}
	m.File = filepath.Join(m.Dir, "mnt")
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := testenv.Run("mount", "--bind", m.Dir, m.Dir); err != nil {
		return nil, err
	}
	if _, err := testenv.Run("mount", "--make-private", m.Dir); err != nil {
		m.release()
		return nil, err
	}
	if err := os.WriteFile(m.File, nil, 0o644); err != nil {
		m.release()
		return nil, err
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, p := range HostPaths {
		src := filepath.Join(dir, "fs", strings.ReplaceAll(strings.TrimPrefix(p, "/"), "/", "-"))
		if err := os.MkdirAll(src, 0o755); err != nil {
			m.release()
			return nil, err
		}
		// The mount point must exist; creating an empty directory on the
		// host is the one trace a node leaves outside its own directory.
		if err := os.MkdirAll(p, 0o755); err != nil {
			m.release()
			return nil, err
		}
		m.Private[p] = src
		fmt.Fprintf(&script, "mount --bind %s %s\n", strconv.Quote(src), strconv.Quote(p))
	}
	script.WriteString("mount --make-rshared /\n")
	if _, err := testenv.Run("unshare", "--mount="+m.File, "--propagation", "slave", "sh", "-c", script.String()); err != nil {
		m.release()
		return nil, fmt.Errorf("creating node mount namespace: %w", err)
	}
	return m, nil
}

// inode identifies the namespace, to find the processes inside it.
func (m *mountNS) inode() (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(m.File, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// pids lists the processes whose mount namespace is m (not those of
// containers, which have namespaces of their own).
func (m *mountNS) pids() []int {
	ino, err := m.inode()
	if err != nil {
		return nil
	}
	want := fmt.Sprintf("mnt:[%d]", ino)
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && l == want {
			out = append(out, pid)
		}
	}
	return out
}

// release kills what still runs in the namespace and drops it: with its
// file unmounted and no process inside, the kernel frees it and every mount
// in it.
func (m *mountNS) release() {
	for _, pid := range m.pids() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = syscall.Unmount(m.File, syscall.MNT_DETACH)
	_ = syscall.Unmount(m.Dir, syscall.MNT_DETACH)
}
