package ovsrun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// The allocators ovs-vswitchd can run with (Options.Malloc, the
// switchyard-ovs --malloc flag).
const (
	// MallocJemalloc preloads jemalloc into ovs-vswitchd; the default.
	MallocJemalloc = "jemalloc"
	// MallocSystem leaves ovs-vswitchd on glibc's malloc.
	MallocSystem = "system"
)

// Why jemalloc: on the userspace datapath ovs-vswitchd's main thread
// receives every packet of a veth port into two fresh heap blocks (the
// packet and its ~2 KiB buffer), 32 at a time per receive call, and frees
// the unused ones right away. Those sizes are past glibc's per-thread
// cache, so each one walks glibc's bins, and that walk lengthens as the
// heap fills with flows and groups: with 10,000 Services, profiled on the
// service benchmark, _int_malloc's share of the switch's CPU doubled
// (5.6 % to 12 %) and the new-connection rate fell with it. jemalloc
// serves those sizes from a per-thread cache whatever the heap holds.

// JemallocPath is where Debian's libjemalloc2 installs the library for
// this architecture.
func JemallocPath() string {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	if arch == "" {
		arch = runtime.GOARCH
	}
	return filepath.Join("/usr/lib", arch+"-linux-gnu", "libjemalloc.so.2")
}

// VswitchdEnv returns env with what ovs-vswitchd needs to run with the
// allocator named by malloc ("" is jemalloc). jemalloc is preloaded from
// lib (JemallocPath when ""), after anything env already preloads; a
// missing library is an error, not a silent fallback, so a node never
// runs a slower switch than its configuration says.
func VswitchdEnv(env []string, malloc, lib string) ([]string, error) {
	switch malloc {
	case MallocSystem:
		return env, nil
	case "", MallocJemalloc:
	default:
		return nil, fmt.Errorf("ovs-vswitchd allocator %q: want %s or %s", malloc, MallocJemalloc, MallocSystem)
	}
	if lib == "" {
		lib = JemallocPath()
	}
	if _, err := os.Stat(lib); err != nil {
		return nil, fmt.Errorf("ovs-vswitchd allocator jemalloc: %s is missing (%v); install Debian's libjemalloc2, or run with --malloc=%s to keep glibc's malloc", lib, err, MallocSystem)
	}
	out := make([]string, 0, len(env)+1)
	preload := lib
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "LD_PRELOAD="); ok {
			if v != "" {
				preload = v + " " + lib
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "LD_PRELOAD="+preload), nil
}

// MapsLibrary reports whether process pid has the shared object lib
// mapped: the proof that a preload took (the dynamic loader only warns
// when it cannot preload, and runs the program anyway).
func MapsLibrary(pid int, lib string) (bool, error) {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return false, err
	}
	real, err := filepath.EvalSymlinks(lib)
	if err != nil {
		real = lib
	}
	for _, line := range strings.Split(string(maps), "\n") {
		if f := strings.Fields(line); len(f) >= 6 && (f[5] == lib || f[5] == real) {
			return true, nil
		}
	}
	return false, nil
}

// ErrMallocUnchecked says VerifyMalloc could not read the process's maps
// (no /proc of its PID namespace, as in a bare chroot); the preload itself
// does not need them.
var ErrMallocUnchecked = errors.New("cannot read the maps of ovs-vswitchd")

// VerifyMalloc checks that ovs-vswitchd (pid), started with VswitchdEnv
// for malloc and lib, really runs with that allocator.
func VerifyMalloc(pid int, malloc, lib string) error {
	if malloc == MallocSystem {
		return nil
	}
	if lib == "" {
		lib = JemallocPath()
	}
	ok, err := MapsLibrary(pid, lib)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMallocUnchecked, err)
	}
	if !ok {
		return fmt.Errorf("ovs-vswitchd runs without %s although it was preloaded (its log says why); check that the library is for this architecture, or run with --malloc=%s", lib, MallocSystem)
	}
	return nil
}
