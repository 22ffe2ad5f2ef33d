package ovsrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/ovsdb"
)

// Options say where the binaries, the database and the sockets are. The
// zero value of a field takes the default below (Debian's paths, which is
// what the switchyard-ovs image holds).
type Options struct {
	OVSDBServer string // /usr/sbin/ovsdb-server
	OVSVswitchd string // /usr/lib/openvswitch-switch/ovs-vswitchd
	OVSDBTool   string // /usr/bin/ovsdb-tool
	Schema      string // /usr/share/openvswitch/vswitch.ovsschema
	// RunDir holds db.sock, the unixctl sockets, pid files and the
	// bridges' .mgmt sockets; the agent's ovs.runDir.
	RunDir string // /var/run/openvswitch
	// DBDir holds conf.db; a host path, so the database survives the pod.
	DBDir string // /var/lib/switchyard/ovs
	// DatapathType is system or netdev (auto resolved by the caller); on
	// netdev ovs-vswitchd runs with --disable-system.
	DatapathType string
	// Bridge is the integration bridge; when it exists at start,
	// flow-restore-wait is set so a restarted ovs-vswitchd forwards nothing
	// with empty tables until the agent has replayed its flows.
	Bridge string // br-int
	// Malloc is ovs-vswitchd's allocator: jemalloc (the default, preloaded
	// from Jemalloc) or system (glibc's); see malloc.go for why.
	Malloc   string
	Jemalloc string // JemallocPath()
	// Log receives the supervisor's own lines; the daemons log to stderr.
	Log *slog.Logger
}

func (o *Options) defaults() {
	set := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	set(&o.OVSDBServer, "/usr/sbin/ovsdb-server")
	set(&o.OVSVswitchd, "/usr/lib/openvswitch-switch/ovs-vswitchd")
	set(&o.OVSDBTool, "/usr/bin/ovsdb-tool")
	set(&o.Schema, "/usr/share/openvswitch/vswitch.ovsschema")
	set(&o.RunDir, "/var/run/openvswitch")
	set(&o.DBDir, "/var/lib/switchyard/ovs")
	set(&o.DatapathType, config.DatapathNetdev)
	set(&o.Bridge, "br-int")
	set(&o.Malloc, MallocJemalloc)
	set(&o.Jemalloc, JemallocPath())
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// DBSocket is the ovsdb-server endpoint (unix:<RunDir>/db.sock).
func (o Options) DBSocket() string { return "unix:" + filepath.Join(o.RunDir, "db.sock") }

func (o Options) dbFile() string { return filepath.Join(o.DBDir, "conf.db") }

func (o Options) env() []string {
	return append(os.Environ(), "OVS_RUNDIR="+o.RunDir, "OVS_DBDIR="+o.DBDir, "OVS_LOGDIR="+o.RunDir, "OVS_SYSCONFDIR="+o.DBDir)
}

// Switch is a running ovsdb-server and ovs-vswitchd.
type Switch struct {
	opts     Options
	ovsdb    *daemon
	vswitchd *daemon
}

// daemon is one child process and the channel its exit lands on.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan error
}

func (o Options) start(name, bin string, env []string, args ...string) (*daemon, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// Its own process group: a Ctrl-C in a terminal reaches the
	// supervisor, which stops the daemons in order. If the supervisor is
	// killed outright the daemons are told to exit too, so a restarted
	// supervisor never finds orphans holding the database lock.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, done: make(chan error, 1)}
	go func() { d.done <- cmd.Wait(); close(d.done) }()
	o.Log.Info("started", "daemon", name, "pid", cmd.Process.Pid)
	return d, nil
}

// stop sends SIGTERM and waits, then SIGKILL. Safe on an exited daemon.
func (d *daemon) stop(grace time.Duration) {
	if d == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(grace):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// Start brings up OVS and returns once ovs-vswitchd answers on its control
// socket. On failure nothing is left running.
func Start(ctx context.Context, o Options) (_ *Switch, err error) {
	o.defaults()
	// A bad allocator choice fails before anything is created or started.
	vswitchdEnv, err := VswitchdEnv(o.env(), o.Malloc, o.Jemalloc)
	if err != nil {
		return nil, err
	}
	s := &Switch{opts: o}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	for _, d := range []string{o.RunDir, o.DBDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	dbSock := filepath.Join(o.RunDir, "db.sock")
	if answers(dbSock, "list_dbs") == nil {
		return nil, fmt.Errorf("an ovsdb-server already answers on %s: another Open vSwitch runs on this node (stop it, or point this one at other directories)", dbSock)
	}
	if err := prepareDB(o); err != nil {
		return nil, err
	}
	// What a killed predecessor left: sockets nobody answers on.
	for _, f := range []string{"db.sock", "ovsdb-server.ctl", "ovs-vswitchd.ctl"} {
		os.Remove(filepath.Join(o.RunDir, f))
	}
	s.ovsdb, err = o.start("ovsdb-server", o.OVSDBServer, o.env(), o.dbFile(),
		"--remote=punix:"+dbSock,
		"--remote=db:Open_vSwitch,Open_vSwitch,manager_options",
		"--unixctl="+filepath.Join(o.RunDir, "ovsdb-server.ctl"),
		"--pidfile="+filepath.Join(o.RunDir, "ovsdb-server.pid"),
		"-vconsole:info", "-vsyslog:off")
	if err != nil {
		return nil, err
	}
	if err := s.wait(ctx, s.ovsdb, dbSock, "list_dbs"); err != nil {
		return nil, err
	}
	if err := initDB(ctx, o); err != nil {
		return nil, err
	}
	args := []string{"unix:" + dbSock,
		"--unixctl=" + filepath.Join(o.RunDir, "ovs-vswitchd.ctl"),
		"--pidfile=" + filepath.Join(o.RunDir, "ovs-vswitchd.pid"),
		"-vconsole:info", "-vsyslog:off",
		// The agent gives it the routes its tunnels need (host/underlay
		// explains why it must not read the kernel's).
		"--disable-system-route"}
	if o.DatapathType == config.DatapathNetdev {
		args = append(args, "--disable-system")
	}
	s.vswitchd, err = o.start("ovs-vswitchd", o.OVSVswitchd, vswitchdEnv, args...)
	if err != nil {
		return nil, err
	}
	if err := s.wait(ctx, s.vswitchd, filepath.Join(o.RunDir, "ovs-vswitchd.ctl"), "version"); err != nil {
		return nil, err
	}
	if err := VerifyMalloc(s.vswitchd.cmd.Process.Pid, o.Malloc, o.Jemalloc); errors.Is(err, ErrMallocUnchecked) {
		o.Log.Warn("cannot check that ovs-vswitchd loaded its allocator", "library", o.Jemalloc, "error", err)
	} else if err != nil {
		return nil, err
	}
	o.Log.Info("Open vSwitch is up", "db", o.dbFile(), "run_dir", o.RunDir, "datapath_type", o.DatapathType, "malloc", o.Malloc)
	return s, nil
}

// prepareDB creates the database from the schema, or converts an existing
// one whose schema is older than the binaries' (an OVS upgrade).
func prepareDB(o Options) error {
	db := o.dbFile()
	if _, err := os.Stat(db); errors.Is(err, os.ErrNotExist) {
		if out, err := exec.Command(o.OVSDBTool, "create", db, o.Schema).CombinedOutput(); err != nil {
			return fmt.Errorf("ovsdb-tool create %s: %v: %s", db, err, out)
		}
		o.Log.Info("created the OVS database", "db", db, "schema", o.Schema)
		return nil
	} else if err != nil {
		return err
	}
	out, err := exec.Command(o.OVSDBTool, "needs-conversion", db, o.Schema).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ovsdb-tool needs-conversion %s: %v: %s", db, err, out)
	}
	if strings.TrimSpace(string(out)) == "yes" {
		if out, err := exec.Command(o.OVSDBTool, "convert", db, o.Schema).CombinedOutput(); err != nil {
			return fmt.Errorf("ovsdb-tool convert %s: %v: %s", db, err, out)
		}
		o.Log.Info("converted the OVS database to the new schema", "db", db)
	}
	return nil
}

// initDB writes the root row and, on a restart (the bridge is there),
// flow-restore-wait.
func initDB(ctx context.Context, o Options) error {
	c, err := ovsdb.Dial(ctx, o.DBSocket(), o.Bridge, o.Log)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.EnsureRoot(ctx); err != nil {
		return err
	}
	v, err := vswitchdVersion(o)
	if err != nil {
		return err
	}
	if err := c.SetOVSVersion(ctx, v); err != nil {
		return err
	}
	exists, err := c.BridgeExists(ctx)
	if err != nil {
		return err
	}
	if exists {
		o.Log.Info("bridge exists: ovs-vswitchd waits for the agent's flows", "bridge", o.Bridge, "other_config", "flow-restore-wait")
		return c.SetFlowRestoreWait(ctx, true)
	}
	return nil
}

// vswitchdVersion asks the binary: "ovs-vswitchd (Open vSwitch) 3.1.0".
func vswitchdVersion(o Options) (string, error) {
	out, err := exec.Command(o.OVSVswitchd, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", o.OVSVswitchd, err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	f := strings.Fields(first)
	if len(f) < 4 || f[1] != "(Open" {
		return "", fmt.Errorf("%s --version printed %q, not a version", o.OVSVswitchd, first)
	}
	return f[len(f)-1], nil
}

// wait polls the daemon's socket until it answers method, failing at once
// when the daemon exits.
func (s *Switch) wait(ctx context.Context, d *daemon, sock, method string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case err := <-d.done:
			return fmt.Errorf("%s exited while starting (%v): see its log above", d.name, err)
		case <-ctx.Done():
			return fmt.Errorf("%s does not answer on %s: %v", d.name, sock, last)
		case <-tick.C:
			if last = answers(sock, method); last == nil {
				return nil
			}
		}
	}
}

// Wait blocks until ctx ends (then stops both daemons and returns nil) or
// a daemon exits (then stops the other and returns an error naming it).
func (s *Switch) Wait(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
		s.opts.Log.Info("stopping Open vSwitch")
	case e := <-s.ovsdb.done:
		err = fmt.Errorf("ovsdb-server exited: %v", e)
	case e := <-s.vswitchd.done:
		err = fmt.Errorf("ovs-vswitchd exited: %v", e)
	}
	s.Stop()
	return err
}

// Stop stops ovs-vswitchd, then ovsdb-server.
func (s *Switch) Stop() {
	s.vswitchd.stop(10 * time.Second)
	s.ovsdb.stop(10 * time.Second)
}

// Probe checks that both daemons of a switch with this run dir answer;
// while switchyard-ovs waits for its datapath it says why instead.
func Probe(runDir string) error {
	if why := unavailable(runDir); why != "" {
		return errors.New(why)
	}
	if err := answers(filepath.Join(runDir, "db.sock"), "list_dbs"); err != nil {
		return fmt.Errorf("ovsdb-server: %w", err)
	}
	if err := answers(filepath.Join(runDir, "ovs-vswitchd.ctl"), "version"); err != nil {
		return fmt.Errorf("ovs-vswitchd: %w", err)
	}
	return nil
}

// answers makes one JSON-RPC call on a unix socket and wants a result.
func answers(sock, method string) error {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	return call(c, method)
}
