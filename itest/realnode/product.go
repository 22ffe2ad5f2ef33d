package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

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
	out := testenv.Dir(t, "img")
	cmd := exec.Command("go", "run", "./manifests/cmd/build-images", "-version", version, "-out", out, "-only", strings.Join(images, ","))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building images: %v\n%s", err, b)
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

// WithUnderlay enables, in switchyard.yml's agent config, the underlay
// bridge the file leaves commented out: on the userspace (netdev) datapath,
// the only one on a machine without the OVS kernel module, the tunnel
// needs the node IP on an OVS bridge, and the file tells operators to
// uncomment that line naming their uplink. Real nodes' uplink is eth0.
func WithUnderlay(t testenv.T, yml []byte) []byte {
	t.Helper()
	const commented = "# underlay: {bridge: br-phy, interface: eth0}"
	if !strings.Contains(string(yml), commented) {
		t.Fatalf("switchyard.yml has no line %q to enable", commented)
	}
	return []byte(strings.Replace(string(yml), commented, "underlay: {bridge: br-phy, interface: eth0}", 1))
}
