package upstream

import (
	"os"
	"path/filepath"
	"strings"
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

// TestModFileKey checks that an alternative go.mod moves only the key of
// the group that builds with it: the kube group keeps its key when
// kube-proxy.mod changes, and the kube-proxy group's key follows it.
func TestModFileKey(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), "module x\n")
	write(t, filepath.Join(dir, "go.sum"), "")
	write(t, filepath.Join(dir, "alt.mod"), "module x\n")
	write(t, filepath.Join(dir, "alt.sum"), "")
	plain := Group{Builds: []Build{{Packages: []string{"example.com/cmd/x"}}}}
	alt := plain
	alt.ModFile = "alt.mod"
	p0, a0 := mustKey(t, plain, dir), mustKey(t, alt, dir)
	if p0 == a0 {
		t.Fatalf("a group with a modfile has the key of the same group without: %s", p0)
	}
	write(t, filepath.Join(dir, "alt.sum"), "example.com/y v1.0.0 h1:x=\n")
	p1, a1 := mustKey(t, plain, dir), mustKey(t, alt, dir)
	if p1 != p0 {
		t.Errorf("plain group's key moved with alt.sum: %s → %s", p0, p1)
	}
	if a1 == a0 {
		t.Errorf("modfile group's key did not move with alt.sum: %s", a0)
	}
}

// TestKubeProxyModFile checks that kube-proxy.mod is the kube module's
// go.mod plus additions only: every line of go.mod and go.sum is in
// kube-proxy.mod and kube-proxy.sum, so kube-proxy is built at exactly
// the kubelet's pins (a bump of go.mod that was not carried over fails
// here), and kube-proxy is one of its tools.
func TestKubeProxyModFile(t *testing.T) {
	dir := filepath.Join("..", "tools", KubeProxy.Module)
	for _, pair := range [][2]string{{"go.mod", KubeProxy.ModFile}, {"go.sum", KubeProxy.sumFile()}} {
		base, err := os.ReadFile(filepath.Join(dir, pair[0]))
		if err != nil {
			t.Fatal(err)
		}
		alt, err := os.ReadFile(filepath.Join(dir, pair[1]))
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, l := range strings.Split(string(alt), "\n") {
			have[strings.TrimSpace(l)] = true
		}
		for _, l := range strings.Split(string(base), "\n") {
			if l = strings.TrimSpace(l); l != "" && !have[l] {
				t.Errorf("%s has %q, %s does not: regenerate it (see upstream.KubeProxy)", pair[0], l, pair[1])
			}
		}
		if pair[0] == "go.mod" && !have["k8s.io/kubernetes/cmd/kube-proxy"] {
			t.Errorf("%s has no tool line for k8s.io/kubernetes/cmd/kube-proxy", pair[1])
		}
	}
}
