package ovs

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"switchyard.dev/switchyard/host/ovsrun"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// SchemaPath is where Debian's openvswitch-common installs the vswitch schema.
const SchemaPath = "/usr/share/openvswitch/vswitch.ovsschema"

// Options configures Start.
type Options struct {
	// Name distinguishes this instance's directory and logs, e.g. "n1".
	Name string
	// NetNS, if set, runs both daemons inside this named network namespace,
	// which must already exist. If empty, Start creates a namespace of its
	// own: the userspace datapath creates tap devices named after the
	// datapath ("ovs-netdev") and each bridge, so two instances can never
	// share a namespace.
	NetNS string
	// Malloc is ovs-vswitchd's allocator, as switchyard-ovs --malloc takes
	// it (host/ovsrun): "" is $SWITCHYARD_OVS_MALLOC, else jemalloc, the
	// product's default, so tests and benchmarks run the switch the way
	// nodes do; SWITCHYARD_OVS_MALLOC=system runs a benchmark against
	// glibc's malloc for comparison.
	Malloc string
}

// Switch is one running OVS instance.
type Switch struct {
	Name  string
	NetNS string
	// Dir is the run directory: conf.db, sockets, pid and log files, and the
	// bridges' OpenFlow management sockets (<bridge>.mgmt).
	Dir string
	// DBSock is the OVSDB endpoint, e.g. "unix:/tmp/.../db.sock".
	DBSock string

	ovsdb    *testenv.Process
	vswitchd *testenv.Process
	bins     map[string]string
	malloc   string // ovs-vswitchd's allocator
	// vswitchdEnv is env() with the allocator's preload.
	vswitchdEnv []string
}

// Start launches ovsdb-server and ovs-vswitchd and stops them on cleanup.
func Start(t testenv.T, opts Options) *Switch {
	t.Helper()
	testenv.RequireRoot(t)
	s := &Switch{Name: opts.Name, NetNS: opts.NetNS, bins: map[string]string{}}
	for bin, pkg := range map[string]string{
		"ovsdb-tool": "openvswitch-common", "ovsdb-server": "openvswitch-switch",
		"ovs-vswitchd": "openvswitch-switch", "ovs-vsctl": "openvswitch-switch",
		"ovs-ofctl": "openvswitch-common", "ovs-appctl": "openvswitch-common",
	} {
		s.bins[bin] = testenv.LookPath(t, bin, pkg)
	}
	if _, err := os.Stat(SchemaPath); err != nil {
		t.Fatalf("OVS schema %s missing: install openvswitch-common", SchemaPath)
	}
	name := opts.Name
	if name == "" {
		name = "ovs"
	}
	if s.NetNS == "" {
		s.NetNS = netns.Create(t, testenv.Name(name))
	}
	s.Dir = testenv.Dir(t, name)
	s.DBSock = "unix:" + filepath.Join(s.Dir, "db.sock")
	s.malloc = cmp.Or(opts.Malloc, os.Getenv("SWITCHYARD_OVS_MALLOC"), ovsrun.MallocJemalloc)
	env, err := ovsrun.VswitchdEnv(s.env(), s.malloc, "")
	if err != nil {
		t.Fatalf("%v", err)
	}
	s.vswitchdEnv = env
	if err := s.start(); err != nil {
		s.Stop()
		t.Fatalf("starting OVS %q: %v", name, err)
	}
	t.Cleanup(s.Stop)
	return s
}

// env points every OVS tool at this instance's run directory, so that
// `ovs-ofctl dump-flows br-int` finds <Dir>/br-int.mgmt.
func (s *Switch) env() []string {
	return []string{"OVS_RUNDIR=" + s.Dir, "OVS_DBDIR=" + s.Dir, "OVS_LOGDIR=" + s.Dir, "OVS_SYSCONFDIR=" + s.Dir}
}

func (s *Switch) start() error {
	db := filepath.Join(s.Dir, "conf.db")
	if out, err := exec.Command(s.bins["ovsdb-tool"], "create", db, SchemaPath).CombinedOutput(); err != nil {
		return fmt.Errorf("ovsdb-tool create: %v: %s", err, out)
	}
	var err error
	s.ovsdb, err = testenv.StartProcess(testenv.ProcessSpec{
		Name: "ovsdb-server", Path: s.bins["ovsdb-server"], Dir: s.Dir, NetNS: s.NetNS, Env: s.env(),
		Args: []string{db, "--remote=p" + s.DBSock, "--unixctl=" + filepath.Join(s.Dir, "ovsdb-server.ctl"),
			"--pidfile=" + filepath.Join(s.Dir, "ovsdb-server.pid"), "-vconsole:off", "-vfile:info",
			"--log-file=" + filepath.Join(s.Dir, "ovsdb-server.log")},
	})
	if err != nil {
		return err
	}
	if err := s.waitSocket(filepath.Join(s.Dir, "db.sock"), s.ovsdb); err != nil {
		return err
	}
	if _, err := s.vsctl("--no-wait", "init"); err != nil {
		return err
	}
	return s.startVswitchd()
}

func (s *Switch) startVswitchd() error {
	ctl := filepath.Join(s.Dir, "ovs-vswitchd.ctl")
	os.Remove(ctl)
	var err error
	s.vswitchd, err = testenv.StartProcess(testenv.ProcessSpec{
		Name: "ovs-vswitchd", Path: s.bins["ovs-vswitchd"], Dir: s.Dir, NetNS: s.NetNS, Env: s.vswitchdEnv,
		Args: []string{s.DBSock, "--disable-system", "--disable-system-route", "--unixctl=" + ctl,
			"--pidfile=" + filepath.Join(s.Dir, "ovs-vswitchd.pid"), "-vconsole:off", "-vfile:info",
			"--log-file=" + filepath.Join(s.Dir, "ovs-vswitchd.log")},
	})
	if err != nil {
		return err
	}
	if err := s.waitSocket(ctl, s.vswitchd); err != nil {
		return err
	}
	if err := ovsrun.VerifyMalloc(s.vswitchd.Pid(), s.malloc, ""); err != nil {
		return fmt.Errorf("%v; log:\n%s", err, s.vswitchd.Tail(20))
	}
	return nil
}

func (s *Switch) waitSocket(path string, p *testenv.Process) error {
	return testenv.Eventually(p.Name+" socket "+path, 10*time.Second, 20*time.Millisecond, func() error {
		if p.Exited() {
			return testenv.Permanent(fmt.Errorf("%s exited early; log:\n%s", p.Name, p.Tail(20)))
		}
		// A socket file left by a killed daemon still exists, so only a
		// successful connect proves the new one is listening.
		c, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// Stop ends both daemons. It is idempotent.
func (s *Switch) Stop() {
	if s.vswitchd != nil {
		s.vswitchd.Stop(5 * time.Second)
	}
	if s.ovsdb != nil {
		s.ovsdb.Stop(5 * time.Second)
	}
}

// AddBridge creates a userspace (netdev) bridge speaking OpenFlow 1.5 with
// fail_mode=secure, and waits until its management socket accepts connections.
func (s *Switch) AddBridge(t testenv.T, name string) {
	t.Helper()
	s.Vsctl(t, "add-br", name, "--", "set", "bridge", name, "datapath_type=netdev",
		"protocols=OpenFlow15", "fail_mode=secure")
	s.AddBridgeWait(t, name)
}

// AddBridgeWait waits until the bridge's management socket exists, e.g.
// after ovs-vswitchd was restarted and recreates bridges from OVSDB.
func (s *Switch) AddBridgeWait(t testenv.T, name string) {
	t.Helper()
	if err := s.waitSocket(s.MgmtSocket(name), s.vswitchd); err != nil {
		t.Fatalf("bridge %s: %v", name, err)
	}
}

// MgmtSocket is the unix socket on which ovs-vswitchd serves OpenFlow for bridge.
func (s *Switch) MgmtSocket(bridge string) string {
	return filepath.Join(s.Dir, bridge+".mgmt")
}

// VswitchdPid is the pid of the running ovs-vswitchd.
func (s *Switch) VswitchdPid() int { return s.vswitchd.Pid() }

// KillVswitchd kills ovs-vswitchd with SIGKILL, as a crash would.
func (s *Switch) KillVswitchd(t testenv.T) {
	t.Helper()
	s.vswitchd.Kill()
}

// StartVswitchd starts ovs-vswitchd again after KillVswitchd; it rebuilds the
// bridges from OVSDB, with empty flow tables.
func (s *Switch) StartVswitchd(t testenv.T) {
	t.Helper()
	if !s.vswitchd.Exited() {
		t.Fatalf("StartVswitchd: ovs-vswitchd (pid %d) is still running", s.vswitchd.Pid())
	}
	if err := s.startVswitchd(); err != nil {
		t.Fatalf("restarting ovs-vswitchd: %v", err)
	}
}

// RestartVswitchd stops ovs-vswitchd gracefully and starts it again.
func (s *Switch) RestartVswitchd(t testenv.T) {
	t.Helper()
	s.vswitchd.Stop(5 * time.Second)
	s.StartVswitchd(t)
}

func (s *Switch) run(bin string, args ...string) (string, error) {
	cmd := exec.Command(s.bins[bin], args...)
	cmd.Env = append(os.Environ(), s.env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (s *Switch) vsctl(args ...string) (string, error) {
	return s.run("ovs-vsctl", append([]string{"--db=" + s.DBSock, "--timeout=10"}, args...)...)
}

// Vsctl runs ovs-vsctl against this instance.
func (s *Switch) Vsctl(t testenv.T, args ...string) string {
	t.Helper()
	out, err := s.vsctl(args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

// Ofctl runs `ovs-ofctl -O OpenFlow15 args...`; bridge names resolve to this
// instance's management sockets.
func (s *Switch) Ofctl(t testenv.T, args ...string) string {
	t.Helper()
	out, err := s.OfctlE(args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

// OfctlE is Ofctl returning the error instead of failing the test.
func (s *Switch) OfctlE(args ...string) (string, error) {
	return s.run("ovs-ofctl", append([]string{"-O", "OpenFlow15"}, args...)...)
}

// Appctl runs ovs-appctl against this instance's ovs-vswitchd.
func (s *Switch) Appctl(t testenv.T, args ...string) string {
	t.Helper()
	out, err := s.run("ovs-appctl", append([]string{"-t", filepath.Join(s.Dir, "ovs-vswitchd.ctl")}, args...)...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}
