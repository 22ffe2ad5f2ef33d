package build

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"switchyard.dev/switchyard/itest/testenv"
)

// Commands builds each package (a path relative to the repository root, e.g.
// "host/cmd/switchyard-agent") into one directory, removed on cleanup, and
// returns the path of each binary by its base name.
func Commands(t testenv.T, pkgs ...string) map[string]string {
	t.Helper()
	itestDir, err := testenv.SourceDir("")
	if err != nil {
		t.Fatalf("%v", err)
	}
	root := filepath.Dir(itestDir)
	dir := testenv.Dir(t, "bin")
	args := []string{"build", "-o", dir + "/"}
	for _, p := range pkgs {
		args = append(args, "./"+strings.TrimPrefix(p, "./"))
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	bins := map[string]string{}
	for _, p := range pkgs {
		name := filepath.Base(p)
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("built %s but %s is missing: %v", p, path, fmt.Sprint(err))
		}
		bins[name] = path
	}
	return bins
}
