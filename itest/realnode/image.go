package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"switchyard.dev/switchyard/manifests/image"
)

// PauseImage is the sandbox image every node's containerd is pinned to. It
// carries the upstream name so nothing in a pod spec or kubelet default has
// to change, but it is built here from itest/cmd/pause.
const PauseImage = "registry.k8s.io/pause:3.10"

// AgnhostImage is the e2e test image, built here from k8s.io/kubernetes
// v1.37.2's test/images/agnhost.
const AgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.56"

// epoch is the creation time of every image built here, so the same binary
// always gives the same image digest.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// PackBinary writes a docker-archive tarball (what `ctr images import` and
// `docker load` read) holding one image tagged ref: a single layer with the
// static binary at /<base name>, run as entrypoint with args.
func PackBinary(binary, ref, out string, args ...string) error {
	target := "/" + filepath.Base(binary)
	img, err := image.Build(image.Spec{
		Layers:     []image.Layer{{Name: filepath.Base(binary), Files: []image.File{{Path: target, Mode: 0o755, Src: binary}}}},
		Entrypoint: append([]string{target}, args...),
		Env:        []string{"PATH=/"},
		Epoch:      epoch,
	})
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if err := image.WriteArchive(out, ref, img); err != nil {
		return fmt.Errorf("writing image %s to %s: %w", ref, out, err)
	}
	return nil
}

// BuildPause builds itest/cmd/pause static into dir and packs it as
// PauseImage, returning the archive's path.
func BuildPause(moduleDir, dir string) (string, error) {
	bin := filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./itest/cmd/pause")
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building pause: %w\n%s", err, out)
	}
	archive := filepath.Join(dir, "pause.tar")
	return archive, PackBinary(bin, PauseImage, archive)
}

// PackAgnhost packs the cached static agnhost binary as AgnhostImage. The
// entrypoint is agnhost itself, so a container's args pick the subcommand
// (netexec, connect, pause ...), as with the upstream image.
func PackAgnhost(agnhost, dir string) (string, error) {
	archive := filepath.Join(dir, "agnhost.tar")
	return archive, PackBinary(agnhost, AgnhostImage, archive)
}
