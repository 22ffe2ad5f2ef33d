// Command switchyard-ovs is the entrypoint of the switchyard-ovs DaemonSet:
// it runs ovsdb-server and ovs-vswitchd for the node (see host/ovsrun), in
// a pod of its own so that upgrading the agent never restarts them.
//
//	switchyard-ovs run   --config /etc/switchyard/agent.yaml   # the container
//	switchyard-ovs probe [--wait 10m|--liveness]                 # readiness; wait for OVS; liveness
//	switchyard-ovs uninstall ...                                 # see manifests/uninstall.yaml
//	switchyard-ovs wait                                          # block until SIGTERM
//
// The datapath type and the bridge come from the agent's own config (the
// same ConfigMap), so the agent and OVS can never disagree about them.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/ovsrun"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", "switchyard-ovs")
	slog.SetDefault(log)
	cmd, args := "run", os.Args[1:]
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "run":
		err = run(args, log)
	case "probe":
		err = probe(args)
	case "uninstall":
		err = uninstall(args, log)
	case "wait":
		// The uninstall DaemonSet's main container: nothing to do but
		// stay up until deleted (the image has no shell or sleep).
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		<-ctx.Done()
		stop()
	default:
		err = fmt.Errorf("unknown command %q (run, probe, uninstall or wait)", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "switchyard-ovs "+cmd+":", err)
		os.Exit(1)
	}
}

// ovsFlags are the flags run and uninstall share.
func ovsFlags(fs *flag.FlagSet, o *ovsrun.Options) *string {
	cfg := fs.String("config", "", "the agent's config file; bridge.name, bridge.datapathType and ovs.runDir are read from it")
	fs.StringVar(&o.RunDir, "run-dir", "", "OVS run directory (sockets, pid files); default /var/run/openvswitch or the config's ovs.runDir")
	fs.StringVar(&o.DBDir, "db-dir", "/var/lib/switchyard/ovs", "directory of conf.db (a host path, so the database outlives the pod)")
	fs.StringVar(&o.DatapathType, "datapath-type", "", "system, netdev or auto (default: the config's bridge.datapathType, else auto)")
	fs.StringVar(&o.Bridge, "bridge", "", "integration bridge (default: the config's bridge.name, else br-int)")
	return cfg
}

// resolve fills what the flags left empty from the agent config, and
// resolves auto the way the agent does.
func resolve(cfgPath string, o *ovsrun.Options) error {
	if cfgPath != "" {
		// Not Load: the config names plugin binaries that live in the
		// agent's image, not in this one.
		c, err := config.LoadUnvalidated(cfgPath)
		if err != nil {
			return err
		}
		if o.RunDir == "" {
			o.RunDir = c.OVS.RunDir
		}
		if o.DatapathType == "" {
			o.DatapathType = c.Bridge.DatapathType
		}
		if o.Bridge == "" {
			o.Bridge = c.Bridge.Name
		}
	}
	if o.DatapathType == "" || o.DatapathType == config.DatapathAuto {
		o.DatapathType = config.DetectDatapath(config.ThisHost())
	}
	if o.DatapathType != config.DatapathSystem && o.DatapathType != config.DatapathNetdev {
		return fmt.Errorf("datapath type %q: want system, netdev or auto", o.DatapathType)
	}
	return nil
}

func run(args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var o ovsrun.Options
	cfg := ovsFlags(fs, &o)
	fs.StringVar(&o.Malloc, "malloc", ovsrun.MallocJemalloc, "ovs-vswitchd's allocator: jemalloc (preloaded; faster per packet on the userspace datapath with large flow tables) or system (glibc)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := resolve(*cfg, &o); err != nil {
		return err
	}
	o.Log = log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// A datapath that cannot work is waited for, not crashed on: the pod
	// stays up and unready with the reason in its events and log.
	if err := ovsrun.WaitForDatapath(ctx, o, ovsrun.KernelDatapath, 5*time.Second); err != nil {
		if ctx.Err() != nil {
			return nil // deleted while waiting
		}
		return err
	}
	sw, err := ovsrun.Start(ctx, o)
	if err != nil {
		return err
	}
	return sw.Wait(ctx)
}

func probe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	runDir := fs.String("run-dir", "/var/run/openvswitch", "OVS run directory")
	wait := fs.Duration("wait", 0, "keep probing this long until OVS answers (the agent pod's wait-for-ovs init container), saying why every 10s")
	liveness := fs.Bool("liveness", false, "the container's liveness: also true while switchyard-ovs waits for a datapath it cannot use yet (it says why in its log and readiness)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *liveness {
		return ovsrun.Alive(*runDir)
	}
	deadline := time.Now().Add(*wait)
	var last time.Time
	for {
		err := ovsrun.Probe(*runDir)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		if time.Since(last) >= 10*time.Second {
			slog.Info("waiting for Open vSwitch (is the switchyard-ovs pod on this node ready? kubectl -n kube-system logs it)", "run_dir", *runDir, "err", err.Error())
			last = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
}
