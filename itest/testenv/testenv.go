package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// T is the part of testing.TB the harness needs. *testing.T and *testing.B
// satisfy it; the demo supplies its own implementation so the same harness
// builds the demo cluster.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Prefix starts the name of every namespace, interface and directory the
// harness creates. `make clean-itest` removes everything carrying it.
const Prefix = "syt"

// BaseDir holds the run directories of all harness runs on this machine.
// Unix socket paths are limited to 108 bytes, so it is kept short.
const BaseDir = "/tmp/switchyard-itest"

var (
	runIDOnce sync.Once
	runID     string
)

// RunID is a short random token, fixed for the life of this process, that
// makes names unique so two test binaries running at once never collide.
func RunID() string {
	runIDOnce.Do(func() {
		var b [3]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(fmt.Sprintf("reading random run id: %v", err))
		}
		runID = hex.EncodeToString(b[:])
		// The owner file tells `make clean-itest` this run is alive, so it
		// only sweeps runs whose process is gone.
		if err := os.MkdirAll(BaseDir, 0o755); err == nil {
			_ = os.WriteFile(ownerFile(runID), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
			pruneOwnerFiles()
		}
	})
	return runID
}

func ownerFile(id string) string { return filepath.Join(BaseDir, "owner-"+Prefix+id) }

// pruneOwnerFiles removes the owner files of runs that ended and left
// nothing behind, so they do not pile up. A dead run that did leave
// something keeps its file until `make clean-itest` sweeps it.
func pruneOwnerFiles() {
	owners, _ := filepath.Glob(filepath.Join(BaseDir, "owner-"+Prefix+"*"))
	for _, f := range owners {
		run := strings.TrimPrefix(filepath.Base(f), "owner-")
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // still alive
		}
		dirs, _ := filepath.Glob(filepath.Join(BaseDir, run+"-*"))
		nss, _ := filepath.Glob(filepath.Join("/var/run/netns", run+"-*"))
		if len(dirs) == 0 && len(nss) == 0 {
			os.Remove(f)
		}
	}
}

// Name returns a run-unique name for a resource, e.g. "syt3fa9c1-n1".
// Callers that name Linux interfaces must keep role short: the result must
// stay within 15 bytes for interface names.
func Name(role string) string {
	return Prefix + RunID() + "-" + role
}

// Dir creates and returns a fresh directory for one harness component under
// BaseDir, removed when t's cleanup runs.
func Dir(t T, role string) string {
	t.Helper()
	if err := os.MkdirAll(BaseDir, 0o755); err != nil {
		t.Fatalf("creating %s: %v", BaseDir, err)
	}
	dir, err := os.MkdirTemp(BaseDir, Prefix+RunID()+"-"+role+"-")
	if err != nil {
		t.Fatalf("creating run directory for %s: %v", role, err)
	}
	trackDir(dir, true)
	t.Cleanup(func() {
		os.RemoveAll(dir)
		trackDir(dir, false)
	})
	return dir
}

// RequireRoot fails t unless the process runs as root, which real network
// namespaces, veths and OVS need.
func RequireRoot(t T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("integration tests need root (network namespaces, veth, OVS): run them as root, e.g. `sudo make test`")
	}
}

// LookPath finds bin in PATH or fails t naming the Debian package to install.
func LookPath(t T, bin, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("%s not found in PATH: install it with `apt-get install %s` (or run `make deps`)", bin, debianPackage)
	}
	return p
}

// Module is the import path of Switchyard's main module.
const Module = "switchyard.dev/switchyard"

var (
	moduleDirOnce sync.Once
	moduleDir     string
	moduleDirErr  error
)

// ModuleDir returns the directory holding the switchyard.dev/switchyard
// module the current module builds against, as `go list -m` resolves it:
// this checkout from inside it, the replace target from a module that
// replaces it, or the module cache for a plain requirement. That is what
// lets the harness run from another module (a plugin's own tests).
func ModuleDir() (string, error) {
	moduleDirOnce.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", Module).CombinedOutput()
		dir := strings.TrimSpace(string(out))
		switch {
		case err != nil:
			moduleDirErr = fmt.Errorf("locating module %s with `go list -m`: %w: %s (the current module must require %s)", Module, err, dir, Module)
		case dir == "":
			moduleDirErr = fmt.Errorf("`go list -m %s` gave no directory: run `go mod download %s`", Module, Module)
		default:
			moduleDir = dir
		}
	})
	return moduleDir, moduleDirErr
}

// SourceDir returns the absolute path of rel relative to the itest folder
// of the switchyard.dev/switchyard module: found from the current working
// directory upwards inside this repository, else through ModuleDir (from
// another module). Nested modules such as itest/tools are not part of a
// downloaded module, only of a checkout or a replace target.
func SourceDir(rel string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "itest", "tools", "go.mod")); err == nil {
			return filepath.Join(d, "itest", rel), nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	root, err := ModuleDir()
	if err != nil {
		return "", fmt.Errorf("no itest/tools/go.mod above %s, and %w", wd, err)
	}
	return filepath.Join(root, "itest", rel), nil
}

// InNewNetNS moves the calling test's goroutine, locked to its thread,
// into a network namespace of its own, for unit tests that talk to the
// kernel (netlink, nftables) without touching the machine's network. The
// thread is never unlocked: Go ends it with the test, and the namespace
// with it. It needs root, as make test runs.
func InNewNetNS(t T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("needs root (it creates a network namespace): run the tests as root, as make test does")
	}
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		t.Fatalf("unshare: %v", err)
	}
}
