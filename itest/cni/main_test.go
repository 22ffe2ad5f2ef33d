package cni

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"switchyard.dev/switchyard/itest/testenv"
)

// bins holds the binaries TestMain built from this tree; the tests run
// them exactly as a node would.
var bins struct {
	dir                 string
	cni, podnet, agent  string
	agentErr, podnetErr error
	cniErr              error
	// beta is the noisy neighbour of the isolation benchmark.
	beta    string
	betaErr error
}

// build compiles pkg (relative to the repository root) into bins.dir.
func build(root, pkg, name string) (string, error) {
	out := filepath.Join(bins.dir, name)
	args := []string{"build", "-o", out}
	env := append(os.Environ(), "GOTOOLCHAIN=local")
	if name == "switchyard-cni" {
		// As the image ships it: static, without symbols. It runs once per
		// ADD and DEL, and the benchmarks set its cost against upstream
		// plugins', so it is measured as kubelet's runtime runs it; a
		// cgo build paid the dynamic loader on every exec.
		args = append(args, "-trimpath", "-ldflags=-s -w")
		env = append(env, "CGO_ENABLED=0")
	}
	cmd := exec.Command("go", append(args, "./"+pkg)...)
	cmd.Dir = root
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./%s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

func TestMain(m *testing.M) {
	itestDir, err := testenv.SourceDir("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "locating the repository:", err)
		os.Exit(1)
	}
	root := filepath.Dir(itestDir)
	if bins.dir, err = os.MkdirTemp("", "switchyard-itest-cni-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins.cni, bins.cniErr = build(root, "cni/cmd/switchyard-cni", "switchyard-cni")
	bins.podnet, bins.podnetErr = build(root, "plugins/podnet", "podnet")
	bins.agent, bins.agentErr = build(root, "host/cmd/switchyard-agent", "switchyard-agent")
	bins.beta, bins.betaErr = build(root, "plugins/testplugins/beta", "beta")
	code := m.Run()
	os.RemoveAll(bins.dir)
	os.Exit(code)
}

// needBins fails t unless every binary built.
func needBins(t testing.TB) {
	t.Helper()
	for _, e := range []error{bins.cniErr, bins.podnetErr, bins.agentErr} {
		if e != nil {
			t.Fatalf("a binary this test runs did not build: %v", e)
		}
	}
}
