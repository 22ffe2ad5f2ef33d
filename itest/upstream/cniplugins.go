package upstream

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// CNIPluginsVersion is the containernetworking/plugins release the harness
// uses as the baseline and for chaining (portmap, bandwidth).
const CNIPluginsVersion = "v1.10.0"

// CNIPlugins are the reference plugins built from that release.
var CNIPlugins = []string{
	"plugins/main/bridge", "plugins/main/loopback", "plugins/ipam/host-local",
	"plugins/meta/portmap", "plugins/meta/bandwidth",
}

// EnsureCNIPlugins returns a directory holding the reference CNI plugins,
// building them with `go install module@version` (the module's own go.mod,
// exactly as upstream pins it) the first time on this machine.
func EnsureCNIPlugins(logf func(string, ...any)) (string, error) {
	dir := filepath.Join(CacheRoot(), "cni-plugins-"+CNIPluginsVersion)
	ok := true
	for _, p := range CNIPlugins {
		if _, err := os.Stat(filepath.Join(dir, filepath.Base(p))); err != nil {
			ok = false
		}
	}
	if ok {
		return dir, nil
	}
	if err := os.MkdirAll(CacheRoot(), 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(CacheRoot(), ".lock-cni"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	logf("building containernetworking/plugins %s into %s", CNIPluginsVersion, dir)
	args := []string{"install", "-trimpath"}
	for _, p := range CNIPlugins {
		args = append(args, "github.com/containernetworking/plugins/"+p+"@"+CNIPluginsVersion)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = os.TempDir() // outside any module, so the plugins' own go.mod governs
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOTOOLCHAIN=local", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building reference CNI plugins: %w\n%s", err, out)
	}
	return dir, nil
}
