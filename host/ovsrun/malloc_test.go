package ovsrun

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestVswitchdEnv(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libjemalloc.so.2")
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "libjemalloc.so.2")
	base := []string{"OVS_RUNDIR=/run/x", "PATH=/bin"}
	for _, tc := range []struct {
		name    string
		env     []string
		malloc  string
		lib     string
		preload string // the LD_PRELOAD value wanted; "" for none
		err     string // a fragment of the error wanted
	}{
		{name: "jemalloc by default", env: base, lib: lib, preload: lib},
		{name: "jemalloc by name", env: base, malloc: MallocJemalloc, lib: lib, preload: lib},
		{name: "after what the environment preloads", env: append(slices.Clone(base), "LD_PRELOAD=/opt/a.so"), lib: lib, preload: "/opt/a.so " + lib},
		{name: "an empty preload is replaced", env: append(slices.Clone(base), "LD_PRELOAD="), lib: lib, preload: lib},
		{name: "system keeps glibc", env: append(slices.Clone(base), "LD_PRELOAD=/opt/a.so"), malloc: MallocSystem, lib: missing, preload: "/opt/a.so"},
		{name: "missing library", env: base, lib: missing, err: "install Debian's libjemalloc2, or run with --malloc=system"},
		{name: "unknown allocator", env: base, malloc: "tcmalloc", lib: lib, err: `allocator "tcmalloc": want jemalloc or system`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := VswitchdEnv(tc.env, tc.malloc, tc.lib)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var preloads []string
			for _, kv := range got {
				if v, ok := strings.CutPrefix(kv, "LD_PRELOAD="); ok {
					preloads = append(preloads, v)
				}
			}
			want := []string{tc.preload}
			if tc.preload == "" {
				want = nil
			}
			if !slices.Equal(preloads, want) {
				t.Fatalf("LD_PRELOAD = %q, want %q (env %q)", preloads, want, got)
			}
			for _, kv := range base {
				if !slices.Contains(got, kv) {
					t.Fatalf("env lost %q: %q", kv, got)
				}
			}
		})
	}
}

func TestMapsLibrary(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// libc through /lib, where the multiarch directory is reached by a
	// symbolic link on a merged-/usr system.
	libc := filepath.Join(strings.Replace(filepath.Dir(JemallocPath()), "/usr/lib", "/lib", 1), "libc.so.6")
	if _, err := os.Stat(libc); err != nil {
		t.Fatalf("this test reads the maps of sleep for Debian's multiarch libc: %v", err)
	}
	if ok, err := eventuallyMaps(cmd.Process.Pid, libc); err != nil || !ok {
		t.Fatalf("MapsLibrary(sleep, %s) = %v, %v; want true", libc, ok, err)
	}
	if ok, err := MapsLibrary(cmd.Process.Pid, "/usr/lib/none/libjemalloc.so.2"); err != nil || ok {
		t.Fatalf("MapsLibrary(sleep, a library it never loaded) = %v, %v; want false", ok, err)
	}
	if _, err := MapsLibrary(1<<30, libc); err == nil {
		t.Fatal("MapsLibrary of a pid that does not exist: want an error")
	}
}

// eventuallyMaps waits out the moment between exec and the loader mapping
// the libraries.
func eventuallyMaps(pid int, lib string) (bool, error) {
	var ok bool
	var err error
	for range 200 {
		if ok, err = MapsLibrary(pid, lib); ok || err != nil {
			return ok, err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ok, err
}
