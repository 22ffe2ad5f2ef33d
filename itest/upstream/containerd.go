package upstream

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ContainerdVersion is the containerd release real nodes run.
const ContainerdVersion = "v2.4.2"

// ContainerdTools are the binaries a node needs from containerd: the daemon,
// its CLI (to import images) and the runc shim it starts per pod. runc
// itself comes from Debian.
var ContainerdTools = []string{"containerd", "ctr", "containerd-shim-runc-v2"}

// containerdLDFlags stamps the version the way containerd's Makefile does,
// so `containerd --version` and the CRI version answer name the release.
const containerdLDFlags = "-X github.com/containerd/containerd/v2/version.Version=" + ContainerdVersion +
	" -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"

// EnsureContainerd returns a directory holding ContainerdTools, building
// them with `go install module@version` (containerd's own go.mod, whose
// dependencies clash with Kubernetes') the first time on this machine. The
// btrfs snapshotter is left out (no_btrfs): it needs C headers and the
// harness uses overlayfs.
func EnsureContainerd(logf func(string, ...any)) (string, error) {
	dir := filepath.Join(CacheRoot(), "containerd-"+ContainerdVersion)
	if have(dir, ContainerdTools) {
		return dir, nil
	}
	if err := os.MkdirAll(CacheRoot(), 0o755); err != nil {
		return "", err
	}
	unlock, err := lockCache(".lock-containerd")
	if err != nil {
		return "", err
	}
	defer unlock()
	if have(dir, ContainerdTools) {
		return dir, nil
	}
	logf("building containerd %s into %s (first run on this machine: about 2 minutes)", ContainerdVersion, dir)
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	args := []string{"install", "-trimpath", "-tags=no_btrfs", "-ldflags=" + containerdLDFlags}
	for _, t := range ContainerdTools {
		args = append(args, "github.com/containerd/containerd/v2/cmd/"+t+"@"+ContainerdVersion)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = os.TempDir() // outside any module, so containerd's own go.mod governs
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOTOOLCHAIN=local", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building containerd %s (%s): %w\n%s", ContainerdVersion, strings.Join(args, " "), err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}
