package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"switchyard.dev/switchyard/host/ovsrun"
	"switchyard.dev/switchyard/manifests/image"
)

type options struct {
	version, out, debCache, repo string
	epoch                        time.Time
	images                       []string
}

type result struct {
	ref, file, digest        string
	layerBytes, archiveBytes int64
}

// imageNames are the images build-images knows, in build order.
var imageNames = []string{"agent", "ovs", "controller", "plugin-template"}

// Where things live inside the images. The agent config's plugin paths
// and the manifests' commands name these.
const (
	binDir    = "/usr/local/bin"
	pluginDir = "/usr/local/lib/switchyard/plugins"
	// cniDir holds the reference CNI plugins install-cni chains after ours
	// (portmap, bandwidth) and copies to the node with switchyard-cni.
	cniDir = "/usr/local/lib/switchyard/cni"
)

// mainPackages are compiled from the main module into one directory; the
// binary names are the packages' last path elements.
var mainPackages = []string{
	"./host/cmd/switchyard-agent",
	"./host/cmd/yardctl",
	"./host/cmd/switchyard-ovs",
	"./host/cmd/switchyard-plugin-install",
	"./cni/cmd/switchyard-cni",
	"./cni/cmd/switchyard-install-cni",
	"./controller/cmd/switchyard-controller",
	"./plugins/podnet", "./plugins/tunnel", "./plugins/service", "./plugins/netpol", "./plugins/egress",
	// The reference plugins the conflist chains (hostPort, bandwidth
	// annotations), from the containernetworking/plugins release in go.mod.
	"github.com/containernetworking/plugins/plugins/meta/portmap",
	"github.com/containernetworking/plugins/plugins/meta/bandwidth",
}

// inTreePlugins go into the agent image's plugin directory.
var inTreePlugins = []string{"podnet", "tunnel", "service", "netpol", "egress"}

// ovsPackages are the Debian packages Open vSwitch's daemons run from:
// the two OVS packages and the libraries their binaries link. ELFClosure
// fails naming any library missing here.
var ovsPackages = []string{
	"openvswitch-switch", "openvswitch-common",
	// ovs-vswitchd's allocator (switchyard-ovs --malloc=jemalloc, the
	// default) and the C++ runtime jemalloc links.
	"libjemalloc2", "libstdc++6", "libgcc-s1",
	"libc6", "libssl3", "libcap-ng0", "libnuma1", "libxdp1", "libbpf1", "libunbound8",
	"libelf1", "zlib1g", "libevent-2.1-7", "libhogweed6", "libnettle8", "libgmp10",
}

// ovsBinaries are taken from those packages: the daemons and the database
// tool the entrypoint runs, and the three CLIs an operator reaches for in
// `kubectl exec` (Switchyard itself never runs them).
var ovsBinaries = []string{
	"/usr/sbin/ovsdb-server",
	"/usr/lib/openvswitch-switch/ovs-vswitchd",
	"/usr/bin/ovsdb-tool",
	"/usr/bin/ovs-vsctl",
	"/usr/bin/ovs-ofctl",
	"/usr/bin/ovs-appctl",
}

const ovsSchema = "/usr/share/openvswitch/vswitch.ovsschema"

func build(o options) ([]result, error) {
	work, err := os.MkdirTemp("", "switchyard-images-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	bins := filepath.Join(work, "bin")
	if err := compile(o.repo, bins); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	var out []result
	for _, name := range o.images {
		var spec image.Spec
		var err error
		switch name {
		case "agent":
			spec = agentImage(bins)
		case "ovs":
			spec, err = ovsImage(o, bins, filepath.Join(work, "ovsroot"))
		case "controller":
			spec, err = controllerImage(o, bins, filepath.Join(work, "caroot"))
		case "plugin-template":
			spec = templateImage(bins)
		}
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", name, err)
		}
		spec.Epoch = o.epoch
		if spec.Labels == nil {
			spec.Labels = map[string]string{}
		}
		spec.Labels["org.opencontainers.image.version"] = o.version
		spec.Labels["org.opencontainers.image.title"] = "switchyard-" + name
		r, err := write(o, "switchyard-"+name, spec)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// compile builds every binary static and reproducibly: no cgo, no paths of
// this machine, no build ID, no VCS stamp.
func compile(repo, dir string) error {
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	flags := []string{"build", "-trimpath", "-ldflags=-s -w -buildid=", "-o"}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	steps := []struct {
		dir  string
		args []string
	}{
		{repo, append(append(flags, abs+"/"), mainPackages...)},
		// The template plugin is its own module, built as a third party
		// would build theirs.
		{filepath.Join(repo, "plugins/template"), append(flags, filepath.Join(abs, "template"), ".")},
	}
	for _, s := range steps {
		cmd := exec.Command("go", s.args...)
		cmd.Dir, cmd.Env = s.dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s (in %s): %v\n%s", strings.Join(s.args, " "), s.dir, err, out)
		}
	}
	return nil
}

// base is what every image but the plugin one starts from: users, a
// writable /tmp (go-plugin puts its sockets there), resolver config.
func base() image.Layer {
	return image.Layer{Name: "base", Files: []image.File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/root", Mode: 0o700, Dir: true},
		{Path: "/home/nonroot", Mode: 0o700, Dir: true},
	}}
}

var pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func bin(bins, name, dst string) image.File {
	return image.File{Path: dst, Mode: 0o755, Src: filepath.Join(bins, name)}
}

func agentImage(bins string) image.Spec {
	var files []image.File
	for _, b := range []string{"switchyard-agent", "switchyard-cni", "switchyard-install-cni", "yardctl"} {
		files = append(files, bin(bins, b, filepath.Join(binDir, b)))
	}
	for _, p := range inTreePlugins {
		files = append(files, bin(bins, p, filepath.Join(pluginDir, p)))
	}
	for _, p := range []string{"portmap", "bandwidth"} {
		files = append(files, bin(bins, p, filepath.Join(cniDir, p)))
	}
	return image.Spec{
		Layers:     []image.Layer{base(), {Name: "switchyard agent, plugins, CNI", Files: files}},
		Entrypoint: []string{binDir + "/switchyard-agent"},
		Cmd:        []string{"--config=/etc/switchyard/agent.yaml"},
		Env:        []string{pathEnv},
	}
}

func ovsImage(o options, bins, root string) (image.Spec, error) {
	debs, err := image.FetchDebs(o.debCache, ovsPackages)
	if err != nil {
		return image.Spec{}, err
	}
	if err := image.Extract(root, debs); err != nil {
		return image.Spec{}, err
	}
	// switchyard-ovs preloads jemalloc into ovs-vswitchd: the library
	// ships as a file of its own, with what it links.
	preload := []string{ovsrun.JemallocPath()}
	libs, err := image.ELFClosure(root, append(slices.Clone(ovsBinaries), preload...))
	if err != nil {
		return image.Spec{}, err
	}
	exe, err := image.RootFiles(root, ovsBinaries, 0o755)
	if err != nil {
		return image.Spec{}, err
	}
	so, err := image.RootFiles(root, append(libs, preload...), 0o644)
	if err != nil {
		return image.Spec{}, err
	}
	schema, err := image.RootFiles(root, []string{ovsSchema}, 0o644)
	if err != nil {
		return image.Spec{}, err
	}
	ovs := append(append(exe, so...), schema...)
	// The dynamic loader must be executable.
	for i := range ovs {
		if strings.Contains(ovs[i].Path, "/ld-linux") {
			ovs[i].Mode = 0o755
		}
	}
	var versions []string
	for _, d := range debs {
		versions = append(versions, d.String())
	}
	return image.Spec{
		Layers: []image.Layer{
			base(),
			{Name: "Open vSwitch from Debian: " + strings.Join(versions[:2], " "), Files: ovs},
			{Name: "switchyard-ovs", Files: []image.File{bin(bins, "switchyard-ovs", binDir+"/switchyard-ovs")}},
		},
		Entrypoint: []string{binDir + "/switchyard-ovs"},
		Cmd:        []string{"run"},
		Env:        []string{pathEnv},
		Labels:     map[string]string{"dev.switchyard.debian-packages": strings.Join(versions, " ")},
	}, nil
}

func controllerImage(o options, bins, root string) (image.Spec, error) {
	debs, err := image.FetchDebs(o.debCache, []string{"ca-certificates"})
	if err != nil {
		return image.Spec{}, err
	}
	if err := image.Extract(root, debs); err != nil {
		return image.Spec{}, err
	}
	// The package ships the certificates and builds the bundle in its
	// postinst (update-ca-certificates), which dpkg-deb -x does not run:
	// concatenate them in name order, as that script does.
	bundle, err := image.CABundle(filepath.Join(root, "usr/share/ca-certificates"))
	if err != nil {
		return image.Spec{}, err
	}
	return image.Spec{
		Layers: []image.Layer{
			base(),
			{Name: "CA certificates from Debian: " + debs[0].String(), Files: []image.File{
				{Path: "/etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: bundle},
			}},
			{Name: "switchyard-controller", Files: []image.File{bin(bins, "switchyard-controller", binDir+"/switchyard-controller")}},
		},
		Entrypoint: []string{binDir + "/switchyard-controller"},
		Env:        []string{pathEnv, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		User:       "65532:65532",
		Labels:     map[string]string{"dev.switchyard.debian-packages": debs[0].String()},
	}, nil
}

// templateImage holds the plugin and the copy entrypoint only: its init
// container runs `switchyard-plugin-install <plugin> /plugins` with the
// agent's plugin volume mounted at /plugins.
func templateImage(bins string) image.Spec {
	return image.Spec{
		Layers: []image.Layer{{Name: "template plugin", Files: []image.File{
			bin(bins, "template", pluginDir+"/template"),
			bin(bins, "switchyard-plugin-install", binDir+"/switchyard-plugin-install"),
		}}},
		Entrypoint: []string{binDir + "/switchyard-plugin-install"},
		Cmd:        []string{pluginDir + "/template", "/plugins"},
	}
}

func write(o options, name string, spec image.Spec) (result, error) {
	img, err := image.Build(spec)
	if err != nil {
		return result{}, err
	}
	ref := "switchyard/" + name + ":" + o.version
	file := filepath.Join(o.out, name+"-"+o.version+".tar")
	if err := image.WriteArchive(file, ref, img); err != nil {
		return result{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return result{}, err
	}
	layers, err := img.Layers()
	if err != nil {
		return result{}, err
	}
	var size int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return result{}, err
		}
		size += n
	}
	fi, err := os.Stat(file)
	if err != nil {
		return result{}, err
	}
	return result{ref: ref, file: file, digest: d.String(), layerBytes: size, archiveBytes: fi.Size()}, nil
}
