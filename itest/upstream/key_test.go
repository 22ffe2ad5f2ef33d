package upstream

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGroupKeys checks what the cache keys depend on: a nested module or
// a non-Go file never moves its parent's key, a build setting moves only
// its own group's key, and a plain wrapper-only group adds nothing.
func TestGroupKeys(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module x\n")
	write(t, filepath.Join(dir, "etcd", "main.go"), "package main\n")
	write(t, filepath.Join(dir, "kube", "go.mod"), "module x/kube\n")
	plain := Group{Builds: []Build{{Packages: []string{"./etcd"}}}}
	flagged := Group{Builds: []Build{{Packages: []string{"./etcd"}, LDFlags: "-X a.b=c"}}}
	fromDep := Group{Builds: []Build{{Packages: []string{"example.com/cmd/x"}}}}

	base := mustKey(t, plain, dir)
	tests := []struct {
		name   string
		change func()
		g      Group
		same   bool
	}{
		{"nested module file", func() { write(t, filepath.Join(dir, "kube", "a.go"), "package kube\n") }, plain, true},
		{"non-Go file", func() { write(t, filepath.Join(dir, "README"), "hi\n") }, plain, true},
		{"ldflags", func() {}, flagged, false},
		{"package from a dependency", func() {}, fromDep, false},
		{"Go file", func() { write(t, filepath.Join(dir, "etcd", "more.go"), "package main\n") }, plain, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.change()
			got := mustKey(t, tt.g, dir)
			if (got == base) != tt.same {
				t.Errorf("key %s, base %s: want same=%v", got, base, tt.same)
			}
		})
	}
}

func mustKey(t *testing.T, g Group, dir string) string {
	t.Helper()
	k, err := g.key(dir)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestControlKeyOnThisCheckout prints the control group's key, so a change
// that would invalidate every machine's cache shows in review.
func TestControlKeyOnThisCheckout(t *testing.T) {
	k, err := Control.key(filepath.Join("..", "tools"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control group key: %s", k)
}
