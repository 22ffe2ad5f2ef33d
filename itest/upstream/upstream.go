package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
)

// Tools are the commands the tools module builds.
var Tools = []string{"kube-apiserver", "etcd"}

// CacheRoot is where built tools are kept across runs on this machine.
func CacheRoot() string {
	if d := os.Getenv("SWITCHYARD_TOOLS_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "switchyard", "tools")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "switchyard", "tools")
}

// key hashes every source file of the tools module, so a version bump in its
// go.mod builds fresh binaries instead of reusing stale ones.
func key(toolsDir string) (string, error) {
	var files []string
	err := filepath.WalkDir(toolsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (filepath.Ext(p) == ".go" || d.Name() == "go.mod" || d.Name() == "go.sum") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(toolsDir, f)
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Ensure returns the directory holding every tool, building them first if
// this machine has no cached build for the current tools module. Concurrent
// callers (parallel test packages) serialise on a lock file, so the build
// runs once.
func Ensure(toolsDir string, logf func(string, ...any)) (string, error) {
	k, err := key(toolsDir)
	if err != nil {
		return "", fmt.Errorf("hashing tools module %s: %w", toolsDir, err)
	}
	dir := filepath.Join(CacheRoot(), k)
	if have(dir) {
		return dir, nil
	}
	if err := os.MkdirAll(CacheRoot(), 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(CacheRoot(), ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking tools cache: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if have(dir) {
		return dir, nil
	}
	if _, err := exec.LookPath("go"); err != nil {
		return "", fmt.Errorf("go not found in PATH: the harness builds kube-apiserver and etcd with the Go toolchain")
	}
	logf("building kube-apiserver and etcd into %s (first run on this machine: about 10 minutes on 2 cores)", dir)
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	args := []string{"build", "-o", tmp + "/"}
	for _, t := range Tools {
		args = append(args, "./"+t)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = toolsDir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building upstream tools in %s: %w\n%s", toolsDir, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

func have(dir string) bool {
	for _, t := range Tools {
		if fi, err := os.Stat(filepath.Join(dir, t)); err != nil || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}
