package egress

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"switchyard.dev/switchyard/itest/testenv"
)

// bins are the commands TestMain built once for the package.
var (
	bins    map[string]string
	binsErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchyard-itest-egress-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins, binsErr = buildAll(dir, "host/cmd/switchyard-agent", "cni/cmd/switchyard-cni", "plugins/podnet", "plugins/tunnel", "plugins/egress")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildAll(dir string, pkgs ...string) (map[string]string, error) {
	itestDir, err := testenv.SourceDir("")
	if err != nil {
		return nil, err
	}
	args := []string{"build", "-o", dir + "/"}
	for _, p := range pkgs {
		args = append(args, "./"+p)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Dir(itestDir)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %w\n%s", err, out)
	}
	out := map[string]string{}
	for _, p := range pkgs {
		out[filepath.Base(p)] = filepath.Join(dir, filepath.Base(p))
	}
	return out, nil
}
