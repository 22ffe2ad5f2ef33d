package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"switchyard.dev/switchyard/itest/testenv"
)

// ProductImages builds Switchyard's image archives (what `make images`
// builds: agent, ovs, controller) at the version manifests/VERSION names,
// which is the tag manifests/switchyard.yml uses, into a directory of the
// test's, and returns their paths. With SWITCHYARD_IMAGE_DIR set (e.g. to
// bin/images after `make images`) the archives there are used instead,
// saving the build's minutes when iterating.
func ProductImages(t testenv.T, images ...string) []string {
	t.Helper()
	root, err := testenv.SourceDir("..")
	if err != nil {
		t.Fatalf("%v", err)
	}
	v, err := os.ReadFile(filepath.Join(root, "manifests", "VERSION"))
	if err != nil {
		t.Fatalf("reading the image version: %v (manifests/VERSION comes with `make images`)", err)
	}
	version := strings.TrimSpace(string(v))
	if len(images) == 0 {
		images = []string{"agent", "ovs", "controller"}
	}
	if dir := os.Getenv("SWITCHYARD_IMAGE_DIR"); dir != "" {
		var files []string
		for _, img := range images {
			f := filepath.Join(dir, fmt.Sprintf("switchyard-%s-%s.tar", img, version))
			if _, err := os.Stat(f); err != nil {
				t.Fatalf("SWITCHYARD_IMAGE_DIR=%s: %v (run `make images`)", dir, err)
			}
			files = append(files, f)
		}
		return files
	}
	out, err := buildOnce(root, version, images)
	if err != nil {
		t.Fatalf("%v", err)
	}
	var files []string
	for _, img := range images {
		f := filepath.Join(out, fmt.Sprintf("switchyard-%s-%s.tar", img, version))
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("build-images wrote no %s: %v", f, err)
		}
		files = append(files, f)
	}
	return files
}

// Manifest returns manifests/switchyard.yml, the one-file install.
func Manifest(t testenv.T) []byte {
	t.Helper()
	root, err := testenv.SourceDir("..")
	if err != nil {
		t.Fatalf("%v", err)
	}
	b, err := os.ReadFile(filepath.Join(root, "manifests", "switchyard.yml"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	return b
}

// built caches the image archives per set of images for the whole test
// binary: building them takes minutes, and every real-node test installs
// the same ones. RemoveBuiltImages (from TestMain) deletes them.
var built struct {
	sync.Mutex
	dirs map[string]string
}

func buildOnce(root, version string, images []string) (string, error) {
	key := version + "\x00" + strings.Join(images, ",")
	built.Lock()
	defer built.Unlock()
	if d, ok := built.dirs[key]; ok {
		return d, nil
	}
	out, err := os.MkdirTemp("", "switchyard-itest-images-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "run", "./manifests/cmd/build-images", "-version", version, "-out", out, "-only", strings.Join(images, ","))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(out)
		return "", fmt.Errorf("building images: %v\n%s", err, b)
	}
	if built.dirs == nil {
		built.dirs = map[string]string{}
	}
	built.dirs[key] = out
	return out, nil
}

// RemoveBuiltImages deletes the archives ProductImages built; call it from
// TestMain after the tests ran.
func RemoveBuiltImages() {
	built.Lock()
	defer built.Unlock()
	for k, d := range built.dirs {
		os.RemoveAll(d)
		delete(built.dirs, k)
	}
}
