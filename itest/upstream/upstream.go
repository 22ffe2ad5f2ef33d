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
	"strings"
	"syscall"
)

// KubernetesVersion is the release the tools module pins (k8s.io/kubernetes
// in itest/tools/go.mod and itest/tools/kube/go.mod).
const KubernetesVersion = "v1.37.2"

// Tools are the commands the control group builds (kube-apiserver, etcd).
// Kept for callers that list what Ensure provides.
var Tools = Control.Tools

// Group is a set of tools built together by one `go build` from one module
// and cached in a directory of their own, keyed by a hash of that module's
// files and of the build's settings. Adding a group therefore never
// invalidates another group's cache (a cold build of the control group
// alone takes about ten minutes on two cores).
type Group struct {
	// Name is used in log messages.
	Name string
	// Module is the module directory relative to itest/tools ("" for the
	// tools module itself). Nested modules are left out of their parent's
	// hash.
	Module string
	// Builds are the `go build` invocations; each lists its packages (a
	// wrapper directory such as ./etcd, or an import path built straight
	// from a dependency, as listed in the module's tool directives).
	Builds []Build
	// Tools are the binaries the builds produce; all must exist for the
	// cache to count as complete.
	Tools []string
	// ModFile, if set, is an alternative go.mod in Module's directory
	// (go build -modfile; its go.sum is the same name ending in .sum):
	// the module's pins plus what this group alone needs, so the group
	// that builds from the plain go.mod keeps its key. Both files are
	// hashed into this group's key.
	ModFile string
}

// Build is one `go build` run of a Group.
type Build struct {
	Packages []string
	// LDFlags is passed as -ldflags.
	LDFlags string
	// Env is added to the environment (CGO_ENABLED=0 for binaries that go
	// into an image without a libc).
	Env []string
}

// versionLDFlags stamps the Kubernetes version into component-base, as the
// upstream release build does; without it a binary reports
// v0.0.0-master+$Format:%H$, which the kubelet and clients cannot parse as
// a release.
var versionLDFlags = strings.Join([]string{
	"-X k8s.io/component-base/version.gitVersion=" + KubernetesVersion,
	"-X k8s.io/component-base/version.gitMajor=1",
	"-X k8s.io/component-base/version.gitMinor=37",
	"-X k8s.io/component-base/version.gitTreeState=clean",
	"-X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z",
}, " ")

// Control is kube-apiserver and etcd from the tools module. Its builds carry
// no settings (no version ldflags), so its cache key is exactly the hash of
// the module's files, as it was before groups existed: machines with a
// cached control group keep it.
var Control = Group{
	Name:   "control plane (kube-apiserver, etcd)",
	Builds: []Build{{Packages: []string{"./kube-apiserver", "./etcd"}}},
	Tools:  []string{"kube-apiserver", "etcd"},
}

// KubeProxy is kube-proxy from the kube group's module, built on demand
// by the service benchmark (its kube-proxy nftables baseline), never by
// `make tools`. kube-proxy needs a few modules the kubelet does not (knftables,
// netlink, ipvs), so it builds with kube-proxy.mod: itest/tools/kube/go.mod
// plus those modules and a tool line for kube-proxy, no pin changed
// (TestKubeProxyModFile checks it). The kube group's key, which hashes
// go.mod and go.sum only, stays the same; the packages both share come
// from Go's build cache. Regenerate after a bump of go.mod with
//
//	cd itest/tools/kube && cp go.mod kube-proxy.mod && cp go.sum kube-proxy.sum &&
//	go mod edit -modfile=kube-proxy.mod -tool=k8s.io/kubernetes/cmd/kube-proxy &&
//	go mod tidy -modfile=kube-proxy.mod
var KubeProxy = Group{
	Name:    "kube-proxy",
	Module:  "kube",
	ModFile: "kube-proxy.mod",
	Builds:  []Build{{Packages: []string{"k8s.io/kubernetes/cmd/kube-proxy"}, LDFlags: versionLDFlags}},
	Tools:   []string{"kube-proxy"},
}

// Kube is what a real node and the rest of the control plane need: kubelet,
// kube-scheduler and kube-controller-manager, plus agnhost (the e2e test
// image's binary, statically linked so it runs in an image without a libc). They come
// from their own module (itest/tools/kube, the same pins as the tools
// module plus the kubelet's extra dependencies), so the control group's
// key is untouched; the shared packages still come from Go's build cache.
var Kube = Group{
	Name:   "kubelet, kube-scheduler, kube-controller-manager, agnhost",
	Module: "kube",
	Builds: []Build{
		{Packages: []string{"k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-scheduler",
			"k8s.io/kubernetes/cmd/kube-controller-manager"}, LDFlags: versionLDFlags},
		// Static through the external linker, not CGO_ENABLED=0: with cgo
		// off every package would compile again apart from kubelet's
		// (about 20 minutes on 2 cores); this way only the link differs.
		// glibc warns that its name lookups want its shared libraries at
		// run time; agnhost's probes dial IPs.
		{Packages: []string{"k8s.io/kubernetes/test/images/agnhost"}, LDFlags: versionLDFlags + " -linkmode=external -extldflags=-static"},
	},
	Tools: []string{"kubelet", "kube-scheduler", "kube-controller-manager", "agnhost"},
}

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

// key hashes every source file of a module (not of modules nested in it),
// so a version bump in its go.mod builds fresh binaries instead of reusing
// stale ones, plus the group's build settings when it has any.
func (g Group) key(moduleDir string) (string, error) {
	var files []string
	err := filepath.WalkDir(moduleDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != moduleDir {
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module is a group of its own
			}
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
		rel, _ := filepath.Rel(moduleDir, f)
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
	}
	if g.ModFile != "" {
		for _, f := range []string{g.ModFile, g.sumFile()} {
			b, err := os.ReadFile(filepath.Join(moduleDir, f))
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "modfile\x00%s\x00%d\x00", f, len(b))
			h.Write(b)
		}
	}
	for _, b := range g.Builds {
		// Wrapper directories are hashed as files above; what else shapes
		// the binaries (packages from dependencies, flags) is hashed here.
		// A group made only of plain wrapper builds adds nothing, which
		// keeps the control group's key what it always was.
		if b.LDFlags == "" && len(b.Env) == 0 && allLocal(b.Packages) {
			continue
		}
		fmt.Fprintf(h, "build\x00%q\x00%q\x00%q\x00", b.Packages, b.LDFlags, b.Env)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// sumFile is the go.sum that goes with ModFile.
func (g Group) sumFile() string { return strings.TrimSuffix(g.ModFile, ".mod") + ".sum" }

func allLocal(pkgs []string) bool {
	for _, p := range pkgs {
		if !strings.HasPrefix(p, "./") {
			return false
		}
	}
	return true
}

// Ensure returns the directory holding the control group's tools
// (kube-apiserver, etcd), building them first if needed.
func Ensure(toolsDir string, logf func(string, ...any)) (string, error) {
	return EnsureGroup(toolsDir, Control, logf)
}

// EnsureGroup returns the directory holding every tool of g, building them
// first if this machine has no cached build for the group's current module.
// Concurrent callers (parallel test packages) serialise on a lock file, so
// the build runs once.
func EnsureGroup(toolsDir string, g Group, logf func(string, ...any)) (string, error) {
	moduleDir := filepath.Join(toolsDir, g.Module)
	k, err := g.key(moduleDir)
	if err != nil {
		return "", fmt.Errorf("hashing tools module %s: %w", moduleDir, err)
	}
	dir := filepath.Join(CacheRoot(), k)
	if have(dir, g.Tools) {
		return dir, nil
	}
	if err := os.MkdirAll(CacheRoot(), 0o755); err != nil {
		return "", err
	}
	unlock, err := lockCache(".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if have(dir, g.Tools) {
		return dir, nil
	}
	if _, err := exec.LookPath("go"); err != nil {
		return "", fmt.Errorf("go not found in PATH: the harness builds %s with the Go toolchain", g.Name)
	}
	logf("building %s into %s (first run on this machine: minutes on 2 cores)", g.Name, dir)
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	for _, b := range g.Builds {
		args := []string{"build", "-o", tmp + "/"}
		if g.ModFile != "" {
			args = append(args, "-modfile="+g.ModFile)
		}
		if b.LDFlags != "" {
			args = append(args, "-ldflags="+b.LDFlags)
		}
		args = append(args, b.Packages...)
		cmd := exec.Command("go", args...)
		cmd.Dir = moduleDir
		cmd.Env = append(append(os.Environ(), "GOTOOLCHAIN=local"), b.Env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("building %s in %s: %w\n%s", g.Name, moduleDir, err, out)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// lockCache takes an exclusive lock on a file in the cache root and returns
// its release.
func lockCache(name string) (func(), error) {
	lock, err := os.OpenFile(filepath.Join(CacheRoot(), name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return nil, fmt.Errorf("locking tools cache: %w", err)
	}
	return func() {
		syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		lock.Close()
	}, nil
}

func have(dir string, tools []string) bool {
	for _, t := range tools {
		if fi, err := os.Stat(filepath.Join(dir, t)); err != nil || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}
