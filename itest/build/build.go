package build

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"switchyard.dev/switchyard/itest/testenv"
)

// Commands builds each package of this repository (a path relative to its
// root, e.g. "host/cmd/switchyard-agent") into one directory, removed on
// cleanup, and returns the path of each binary by its base name.
func Commands(t testenv.T, pkgs ...string) map[string]string {
	t.Helper()
	imports := make([]string, len(pkgs))
	for i, p := range pkgs {
		imports[i] = testenv.Module + "/" + strings.Trim(strings.TrimPrefix(p, "./"), "/")
	}
	return Packages(t, imports...)
}

// Packages builds main packages named by Go import path into one directory,
// removed on cleanup, and returns the path of each binary by the last
// element of its import path. Packages of switchyard.dev/switchyard are
// built inside that module (testenv.ModuleDir), with its own go.sum, so a
// module that merely requires it can build the agent; any other package is
// built in the current module (the test's working directory), e.g. a
// plugin building itself.
func Packages(t testenv.T, pkgs ...string) map[string]string {
	t.Helper()
	var own, other []string
	bins := map[string]string{}
	dir := testenv.Dir(t, "bin")
	for _, p := range pkgs {
		name := path.Base(p)
		if _, dup := bins[name]; dup {
			t.Fatalf("build: two packages would both build a binary named %q (%v): build them separately", name, pkgs)
		}
		bins[name] = filepath.Join(dir, name)
		if p == testenv.Module || strings.HasPrefix(p, testenv.Module+"/") {
			own = append(own, p)
		} else {
			other = append(other, p)
		}
	}
	if len(own) > 0 {
		root, err := testenv.ModuleDir()
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		goBuild(t, root, dir, own)
	}
	if len(other) > 0 {
		goBuild(t, "", dir, other)
	}
	for name, bin := range bins {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("built %s but %s is missing: %v (is it a main package?)", name, bin, fmt.Sprint(err))
		}
	}
	return bins
}

// Into builds packages of this repository (paths relative to its root,
// e.g. "plugins/podnet") into dir and returns each binary's path by base
// name. It needs no testing.T, for a TestMain that builds once for all of
// a package's tests; dir is the caller's to remove.
func Into(dir string, pkgs ...string) (map[string]string, error) {
	root, err := testenv.ModuleDir()
	if err != nil {
		return nil, err
	}
	rel := make([]string, len(pkgs))
	out := map[string]string{}
	for i, p := range pkgs {
		rel[i] = "./" + strings.Trim(strings.TrimPrefix(p, "./"), "/")
		out[filepath.Base(p)] = filepath.Join(dir, filepath.Base(p))
	}
	if err := runBuild(root, dir, rel); err != nil {
		return nil, err
	}
	return out, nil
}

// goBuild runs go build for pkgs in workdir ("" is the current directory).
func goBuild(t testenv.T, workdir, outDir string, pkgs []string) {
	t.Helper()
	if err := runBuild(workdir, outDir, pkgs); err != nil {
		t.Fatalf("%v", err)
	}
}

func runBuild(workdir, outDir string, pkgs []string) error {
	args := append([]string{"build", "-o", outDir + "/"}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = workdir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		where := workdir
		if where == "" {
			where, _ = os.Getwd()
		}
		return fmt.Errorf("go %s (in %s): %v\n%s", strings.Join(args, " "), where, err, out)
	}
	return nil
}
