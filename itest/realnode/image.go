package realnode

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
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
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	body, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	target := "/" + filepath.Base(binary)
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Name: target[1:], Mode: 0o755, Size: int64(len(body)),
		ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(body); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: epoch}, CreatedBy: "switchyard itest/realnode: " + filepath.Base(binary),
	}})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	// containerd imports only images for its own platform.
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = append([]string{target}, args...)
	cf.Config.Env = []string{"PATH=/"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, tag, img); err != nil {
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
