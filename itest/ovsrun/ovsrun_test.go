package ovsrun_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchyard.dev/switchyard/cni/conflist"
	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/host/ovsrun"
	"switchyard.dev/switchyard/itest/build"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/sdk"
)

// node is one switchyard-ovs setup: a namespace and the host directories
// the DaemonSet would mount.
type node struct {
	bin, ns, dir, runDir, dbDir string
}

func newNode(t *testing.T) node {
	t.Helper()
	testenv.RequireRoot(t)
	for bin, pkg := range map[string]string{"ovsdb-server": "openvswitch-common", "ovsdb-tool": "openvswitch-common"} {
		testenv.LookPath(t, bin, pkg)
	}
	if _, err := os.Stat("/usr/lib/openvswitch-switch/ovs-vswitchd"); err != nil {
		t.Fatalf("ovs-vswitchd missing: apt-get install openvswitch-switch")
	}
	bins := build.Commands(t, "host/cmd/switchyard-ovs")
	dir := testenv.Dir(t, "ovsrun")
	return node{
		bin: bins["switchyard-ovs"], ns: netns.Create(t, testenv.Name("ovsrun")), dir: dir,
		runDir: filepath.Join(dir, "run"), dbDir: filepath.Join(dir, "db"),
	}
}

func (n node) args(cmd string, extra ...string) []string {
	return append([]string{cmd, "--run-dir=" + n.runDir, "--db-dir=" + n.dbDir, "--datapath-type=netdev"}, extra...)
}

// start runs `switchyard-ovs run` in the namespace and waits until the
// probe passes.
func (n node) start(t *testing.T, name string, extra ...string) *testenv.Process {
	t.Helper()
	p, err := testenv.StartProcess(testenv.ProcessSpec{Name: name, Path: n.bin, Args: n.args("run", extra...), NetNS: n.ns, Dir: n.dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(15 * time.Second) })
	err = testenv.Eventually("switchyard-ovs probe", 30*time.Second, 50*time.Millisecond, func() error {
		if p.Exited() {
			return testenv.Permanent(errorf("switchyard-ovs exited:\n%s", p.Tail(30)))
		}
		_, err := n.run("probe", "--run-dir="+n.runDir)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs a switchyard-ovs subcommand to completion in the namespace.
func (n node) run(cmd string, args ...string) (string, error) {
	return netns.Exec(n.ns, append([]string{n.bin, cmd}, args...)...)
}

func (n node) dial(t *testing.T) *ovsdb.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := ovsdb.Dial(ctx, "unix:"+filepath.Join(n.runDir, "db.sock"), "br-int", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func (n node) hasLink(name string) bool {
	_, err := netns.Exec(n.ns, "ip", "link", "show", name)
	return err == nil
}

// vswitchdMapsJemalloc reports whether the running ovs-vswitchd has
// jemalloc loaded.
func (n node) vswitchdMapsJemalloc(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.runDir, "ovs-vswitchd.pid"))
	if err != nil {
		t.Fatalf("ovs-vswitchd wrote no pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("ovs-vswitchd pid file: %v", err)
	}
	ok, err := ovsrun.MapsLibrary(pid, ovsrun.JemallocPath())
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// stop sends SIGTERM and wants a clean exit with both daemons gone.
func (n node) stop(t *testing.T, p *testenv.Process) {
	t.Helper()
	pids := map[string]string{}
	for _, d := range []string{"ovsdb-server", "ovs-vswitchd"} {
		b, err := os.ReadFile(filepath.Join(n.runDir, d+".pid"))
		if err != nil {
			t.Fatalf("%s wrote no pid file: %v", d, err)
		}
		pids[d] = strings.TrimSpace(string(b))
	}
	p.Stop(20 * time.Second)
	for d, pid := range pids {
		if _, err := os.Stat("/proc/" + pid); err == nil {
			t.Errorf("%s (pid %s) still runs after switchyard-ovs stopped", d, pid)
		}
	}
}

func TestOVSEntrypointLifecycle(t *testing.T) {
	n := newNode(t)
	ctx := context.Background()

	// An allocator it does not know is refused before anything starts.
	if out, err := n.run("run", n.args("", "--malloc=tcmalloc")[1:]...); err == nil || !strings.Contains(out, `allocator "tcmalloc": want jemalloc or system`) {
		t.Errorf("switchyard-ovs run --malloc=tcmalloc: err=%v, want a refusal naming the choices; output:\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(n.runDir, "db.sock")); err == nil {
		t.Errorf("the refused run left %s behind", filepath.Join(n.runDir, "db.sock"))
	}

	p := n.start(t, "ovs-first")
	if _, err := os.Stat(filepath.Join(n.dbDir, "conf.db")); err != nil {
		t.Fatalf("first start created no database: %v", err)
	}
	if !n.vswitchdMapsJemalloc(t) {
		t.Errorf("ovs-vswitchd runs without %s: switchyard-ovs preloads it by default", ovsrun.JemallocPath())
	}
	c := n.dial(t)
	if err := c.EnsureBridge(ctx, "netdev"); err != nil {
		t.Fatalf("the agent's bridge setup fails on this OVS: %v", err)
	}
	if err := testenv.Eventually("br-int in the node namespace", 10*time.Second, 50*time.Millisecond, func() error {
		if !n.hasLink("br-int") {
			return errorf("no br-int link")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := testenv.Eventually("ovs_version recorded", 10*time.Second, 50*time.Millisecond, func() error {
		v, err := c.OVSVersion(ctx)
		if err == nil && v == "" {
			err = errorf("ovs_version empty")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// A second instance on the same directories must refuse, not steal
	// the sockets of the running one.
	out, err := netns.Exec(n.ns, append([]string{n.bin}, n.args("run")...)...)
	if err == nil || !strings.Contains(out, "already answers") {
		t.Errorf("second switchyard-ovs on the same run dir: err=%v, want a refusal naming the running server; output:\n%s", err, out)
	}
	// So must uninstall while OVS runs.
	if out, err := n.run("uninstall", n.args("")[1:]...); err == nil || !strings.Contains(out, "still answers") {
		t.Errorf("uninstall with OVS running: err=%v, want a refusal; output:\n%s", err, out)
	}
	c.Close()
	n.stop(t, p)

	// A restart keeps the database and holds forwarding until the agent
	// has replayed its flows. This one keeps glibc's malloc.
	p = n.start(t, "ovs-second", "--malloc=system")
	if n.vswitchdMapsJemalloc(t) {
		t.Errorf("ovs-vswitchd loaded %s under --malloc=system", ovsrun.JemallocPath())
	}
	c = n.dial(t)
	if ok, err := c.BridgeExists(ctx); err != nil || !ok {
		t.Fatalf("br-int after restart: exists=%v err=%v: the database was not kept", ok, err)
	}
	if wait, err := c.FlowRestoreWait(ctx); err != nil || !wait {
		t.Errorf("flow-restore-wait after restart = %v (%v), want true", wait, err)
	}
	c.Close()
	n.stop(t, p)
}

func TestUninstallLeavesTheNodeClean(t *testing.T) {
	n := newNode(t)
	ctx := context.Background()

	// A node as the DaemonSets leave it: OVS with br-int, the CNI files
	// install-cni wrote, the agent's state directory.
	p := n.start(t, "ovs")
	c := n.dial(t)
	if err := c.EnsureBridge(ctx, "netdev"); err != nil {
		t.Fatal(err)
	}
	// A warm pair of podnet's (both ends in the node netns, its port
	// marked sdk.ExternalIDNodeVeth), and a veth on the node that is not
	// Switchyard's, to be left alone.
	for _, pair := range [][2]string{{"sywtest", "syltest"}, {"nodeveth0", "nodeveth1"}} {
		if out, err := netns.Exec(n.ns, "ip", "link", "add", pair[0], "type", "veth", "peer", "name", pair[1]); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	if err := c.CreatePort(ctx, ovsdb.PortSpec{Name: "sywtest", Owner: "podnet",
		ExternalIDs: map[string]string{sdk.ExternalIDNodeVeth: "true"}}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	n.stop(t, p)

	binDir, confDir := filepath.Join(n.dir, "cni-bin"), filepath.Join(n.dir, "cni-conf")
	chained, agentDir := filepath.Join(n.dir, "image-cni"), filepath.Join(n.dir, "agent-state")
	for _, d := range []string{binDir, chained, agentDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeExe := func(p, content string) {
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeExe(filepath.Join(binDir, "portmap"), "the node's own portmap")
	writeExe(filepath.Join(chained, "portmap"), "ours")
	writeExe(filepath.Join(chained, "bandwidth"), "ours")
	writeExe(filepath.Join(n.dir, "switchyard-cni"), "cni")
	writeExe(filepath.Join(agentDir, "state.json"), "{}")
	o := conflist.Options{BinDir: binDir, ConfDir: confDir, PortMap: true, Bandwidth: true}
	if _, err := conflist.InstallChained(chained, o); err != nil {
		t.Fatal(err)
	}
	if _, err := conflist.Install(filepath.Join(n.dir, "switchyard-cni"), o); err != nil {
		t.Fatal(err)
	}

	out, err := n.run("uninstall", n.args("", "--cni-bin-dir="+binDir, "--cni-conf-dir="+confDir, "--remove="+agentDir)[1:]...)
	if err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	if !strings.Contains(out, "deleted bridge br-int") {
		t.Errorf("uninstall did not report deleting br-int:\n%s", out)
	}
	for _, gone := range []string{
		filepath.Join(confDir, conflist.DefaultFileName), filepath.Join(binDir, "switchyard-cni"),
		filepath.Join(binDir, "bandwidth"), filepath.Join(binDir, conflist.InstalledList),
		n.dbDir, n.runDir, agentDir,
	} {
		if _, err := os.Stat(gone); err == nil {
			t.Errorf("%s is still there after uninstall", gone)
		}
	}
	if b, err := os.ReadFile(filepath.Join(binDir, "portmap")); err != nil || string(b) != "the node's own portmap" {
		t.Errorf("the node's own portmap was touched: %q, %v", b, err)
	}
	if n.hasLink("br-int") {
		t.Errorf("br-int link still in the node namespace")
	}
	if n.hasLink("sywtest") || n.hasLink("syltest") {
		t.Errorf("the veth pair of a port marked %s is still in the node namespace", sdk.ExternalIDNodeVeth)
	}
	if !n.hasLink("nodeveth0") {
		t.Errorf("uninstall deleted a veth of the node's that was no port of Switchyard's")
	}
	if pids, _ := exec.Command("pgrep", "-f", n.runDir).Output(); len(strings.TrimSpace(string(pids))) > 0 {
		t.Errorf("processes still name %s: %s", n.runDir, pids)
	}
	// A second run finds nothing to do and succeeds.
	if out, err := n.run("uninstall", n.args("", "--cni-bin-dir="+binDir, "--cni-conf-dir="+confDir)[1:]...); err != nil {
		t.Errorf("second uninstall: %v\n%s", err, out)
	}
}
