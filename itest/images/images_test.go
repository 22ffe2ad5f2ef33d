package images_test

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"

	"switchyard.dev/switchyard/host/ovsrun"
	"switchyard.dev/switchyard/itest/build"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/manifests/image"
)

const version = "itest"

var names = []string{"agent", "ovs", "controller", "plugin-template"}

// buildImages runs build-images into a fresh directory and returns the
// images it wrote, by name.
func buildImages(t *testing.T, tool, repo, role string) map[string]v1.Image {
	t.Helper()
	out := testenv.Dir(t, role)
	cmd := exec.Command(tool, "-version", version, "-out", out, "-repo", repo)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	// Dies with the test (an interrupted run must not leave a build going).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build-images: %v\n%s", err, res)
	}
	t.Logf("build-images (%s):\n%s", role, res)
	imgs := map[string]v1.Image{}
	for _, n := range names {
		file := filepath.Join(out, "switchyard-"+n+"-"+version+".tar")
		img, err := image.ReadArchive(file, "switchyard/switchyard-"+n+":"+version)
		if err != nil {
			t.Fatalf("reading %s back: %v", file, err)
		}
		imgs[n] = img
	}
	return imgs
}

// extract unpacks the image's filesystem into dir and returns each
// regular file's mode by path.
func extract(t *testing.T, img v1.Image, dir string) map[string]os.FileMode {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]os.FileMode{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != 0 {
			t.Errorf("%s: owner %d:%d mtime %v, want 0:0 at the epoch", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		p := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, os.FileMode(h.Mode)&os.ModePerm)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			files["/"+h.Name] = os.FileMode(h.Mode)
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&os.ModePerm); err == nil {
				_, err = io.Copy(f, tr)
				f.Close()
			}
		default:
			t.Errorf("%s: unexpected tar entry type %c", h.Name, h.Typeflag)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// chroot runs a command inside root with nothing from this machine.
func chroot(root string, args ...string) (string, error) {
	var opts []string
	for len(args) > 0 && strings.HasPrefix(args[0], "--") {
		opts, args = append(opts, args[0]), args[1:]
	}
	out, err := exec.Command("chroot", append(append(opts, root), args...)...).CombinedOutput()
	return string(out), err
}

func TestProductImages(t *testing.T) {
	testenv.RequireRoot(t)
	for _, bin := range []string{"apt-get", "dpkg-deb"} {
		testenv.LookPath(t, bin, "apt")
	}
	repo, err := testenv.ModuleDir()
	if err != nil {
		t.Fatal(err)
	}
	tool := build.Commands(t, "manifests/cmd/build-images")["build-images"]
	first := buildImages(t, tool, repo, "img1")
	second := buildImages(t, tool, repo, "img2")

	for _, n := range names {
		d1, _ := first[n].Digest()
		d2, _ := second[n].Digest()
		if d1 != d2 {
			t.Errorf("%s: two builds of one tree gave digests %s and %s", n, d1, d2)
		}
	}

	type want struct {
		entrypoint []string
		user       string
		files      []string
		// runs are commands to run chrooted, with what their output must hold.
		runs [][2][]string
	}
	wants := map[string]want{
		"agent": {
			entrypoint: []string{"/usr/local/bin/switchyard-agent"},
			files: []string{
				"/usr/local/bin/switchyard-agent", "/usr/local/bin/switchyard-cni", "/usr/local/bin/switchyard-install-cni",
				"/usr/local/bin/yardctl", "/usr/local/lib/switchyard/plugins/podnet", "/usr/local/lib/switchyard/plugins/tunnel",
				"/usr/local/lib/switchyard/plugins/service", "/usr/local/lib/switchyard/plugins/netpol",
				"/usr/local/lib/switchyard/plugins/egress", "/usr/local/lib/switchyard/cni/portmap",
				"/usr/local/lib/switchyard/cni/bandwidth",
			},
			runs: [][2][]string{
				{{"/usr/local/bin/yardctl", "--help"}, {"yardctl"}},
				// pflag exits 1 on --help; the usage is what counts.
				{{"/usr/local/bin/switchyard-agent", "--help"}, {"--config", "any-exit"}},
			},
		},
		"ovs": {
			entrypoint: []string{"/usr/local/bin/switchyard-ovs"},
			files: []string{
				"/usr/lib/openvswitch-switch/ovs-vswitchd", "/usr/sbin/ovsdb-server", "/usr/bin/ovsdb-tool",
				"/usr/share/openvswitch/vswitch.ovsschema", "/usr/local/bin/switchyard-ovs", "/lib64/ld-linux-x86-64.so.2",
				ovsrun.JemallocPath(),
			},
			runs: [][2][]string{
				{{"/usr/lib/openvswitch-switch/ovs-vswitchd", "--version"}, {"ovs-vswitchd (Open vSwitch)"}},
				{{"/usr/sbin/ovsdb-server", "--version"}, {"ovsdb-server (Open vSwitch)"}},
				{{"/usr/bin/ovsdb-tool", "--version"}, {"ovsdb-tool (Open vSwitch)"}},
				{{"/usr/bin/ovs-ofctl", "--version"}, {"OpenFlow versions"}},
			},
		},
		"controller": {
			entrypoint: []string{"/usr/local/bin/switchyard-controller"},
			user:       "65532:65532",
			files:      []string{"/usr/local/bin/switchyard-controller", "/etc/ssl/certs/ca-certificates.crt", "/etc/passwd"},
			runs: [][2][]string{
				{{"--userspec=65532:65532", "/usr/local/bin/switchyard-controller", "-h"}, {"-listen"}},
			},
		},
		"plugin-template": {
			entrypoint: []string{"/usr/local/bin/switchyard-plugin-install"},
			files:      []string{"/usr/local/lib/switchyard/plugins/template", "/usr/local/bin/switchyard-plugin-install"},
			runs: [][2][]string{
				// The init container's job: copy the plugin into the shared volume.
				{{"/usr/local/bin/switchyard-plugin-install", "/usr/local/lib/switchyard/plugins/template", "/plugins"}, {"installed /plugins/template"}},
			},
		},
	}
	roots := map[string]string{}
	for _, n := range names {
		// Made by the parent test: the OVS run below uses the ovs root after
		// the subtests end. Readable by all, as an image's / is, so the
		// controller can run as 65532.
		roots[n] = testenv.Dir(t, "root-"+n)
		if err := os.Chmod(roots[n], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		w := wants[n]
		t.Run(n, func(t *testing.T) {
			img := first[n]
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cf.Config.Entrypoint, w.entrypoint) || cf.Config.User != w.user {
				t.Errorf("entrypoint %v user %q, want %v %q", cf.Config.Entrypoint, cf.Config.User, w.entrypoint, w.user)
			}
			if cf.Config.Labels["org.opencontainers.image.version"] != version {
				t.Errorf("version label %q", cf.Config.Labels["org.opencontainers.image.version"])
			}
			root := roots[n]
			files := extract(t, img, root)
			for _, f := range w.files {
				if _, ok := files[f]; !ok {
					t.Errorf("image lacks %s", f)
				}
			}
			for _, r := range w.runs {
				out, err := chroot(root, r[0]...)
				if len(r[1]) > 1 && r[1][1] == "any-exit" {
					err = nil
				}
				if err != nil || !strings.Contains(out, r[1][0]) {
					t.Errorf("chroot %s: err=%v, want output holding %q:\n%s", strings.Join(r[0], " "), err, r[1][0], out)
				}
			}
			size := int64(0)
			layers, _ := img.Layers()
			for _, l := range layers {
				s, _ := l.Size()
				size += s
			}
			t.Logf("%s: %d layers, %.1f MiB compressed, %d files", n, len(layers), float64(size)/(1<<20), len(files))
		})
	}
	if b, err := os.ReadFile(filepath.Join(roots["controller"], "etc/ssl/certs/ca-certificates.crt")); err != nil || strings.Count(string(b), "BEGIN CERTIFICATE") < 50 {
		t.Errorf("controller CA bundle holds %d certificates (%v)", strings.Count(string(b), "BEGIN CERTIFICATE"), err)
	}
	if root := roots["ovs"]; root != "" {
		t.Run("ovs image runs Open vSwitch", func(t *testing.T) { runOVS(t, root) })
	}
}

// runOVS starts the image's entrypoint chrooted in a node namespace, as
// the switchyard-ovs DaemonSet does, and waits for its readiness probe.
func runOVS(t *testing.T, root string) {
	ns := netns.Create(t, testenv.Name("img"))
	for _, d := range []string{"var/run/openvswitch", "var/lib/switchyard/ovs", "dev"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// What the container runtime gives every container: OVS reads
	// /dev/urandom. Device nodes, not mounts, so removing the directory
	// removes them.
	for name, minor := range map[string]int{"null": 3, "zero": 5, "urandom": 9} {
		if err := unix.Mknod(filepath.Join(root, "dev", name), unix.S_IFCHR|0o666, int(unix.Mkdev(1, uint32(minor)))); err != nil {
			t.Fatal(err)
		}
	}
	p, err := testenv.StartProcess(testenv.ProcessSpec{
		Name: "switchyard-ovs", Path: "chroot", NetNS: ns, Dir: root,
		Args: []string{root, "/usr/local/bin/switchyard-ovs", "run", "--datapath-type=netdev"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(15 * time.Second) })
	err = testenv.Eventually("switchyard-ovs probe in the image", 30*time.Second, 100*time.Millisecond, func() error {
		if p.Exited() {
			return testenv.Permanent(errors.New("switchyard-ovs exited:\n" + p.Tail(30)))
		}
		_, err := chroot(root, "/usr/local/bin/switchyard-ovs", "probe")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "var/lib/switchyard/ovs/conf.db")); err != nil {
		t.Errorf("no database created in the image's db dir: %v", err)
	}
	// The entrypoint preloads the image's jemalloc into ovs-vswitchd. The
	// chroot has no /proc, so the check reads the maps from out here,
	// where they name the library under the image root.
	pidFile, err := os.ReadFile(filepath.Join(root, "var/run/openvswitch/ovs-vswitchd.pid"))
	if err != nil {
		t.Fatalf("ovs-vswitchd wrote no pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidFile)))
	if err != nil {
		t.Fatalf("ovs-vswitchd pid file: %v", err)
	}
	if ok, err := ovsrun.MapsLibrary(pid, filepath.Join(root, ovsrun.JemallocPath())); err != nil || !ok {
		t.Errorf("ovs-vswitchd in the image runs without the image's jemalloc (maps read: %v)", err)
	}
	p.Stop(15 * time.Second)
	if !p.Exited() {
		t.Errorf("switchyard-ovs did not exit on SIGTERM")
	}
}
