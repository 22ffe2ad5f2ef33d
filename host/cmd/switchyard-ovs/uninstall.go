package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"

	"switchyard.dev/switchyard/cni/conflist"
	"switchyard.dev/switchyard/host/ovsrun"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// uninstall is the container of manifests/uninstall.yaml: it cleans the
// node, then (with --wait) stays up so the DaemonSet shows every node done
// (Ready) instead of restarting the cleanup forever.
func uninstall(args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("uninstall", flag.ContinueOnError)
	var u ovsrun.UninstallOptions
	cfg := ovsFlags(fs, &u.OVS)
	fs.StringVar(&u.CNI.BinDir, "cni-bin-dir", conflist.DefaultBinDir, "CNI bin directory install-cni wrote to")
	fs.StringVar(&u.CNI.ConfDir, "cni-conf-dir", conflist.DefaultConfDir, "CNI config directory install-cni wrote to")
	var remove listFlag
	fs.Var(&remove, "remove", "a further directory to remove (repeatable): the agent's run and state directories")
	wait := fs.Bool("wait", false, "after cleaning, wait for SIGTERM (as a DaemonSet's container)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := resolve(*cfg, &u.OVS); err != nil {
		return err
	}
	u.OVS.Log, u.Remove = log, remove
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rep, err := ovsrun.Uninstall(ctx, u)
	if rep.BridgeDeleted != "" {
		fmt.Println("deleted bridge", rep.BridgeDeleted)
	}
	for _, p := range rep.Removed {
		fmt.Println("removed", p)
	}
	if err != nil {
		return err
	}
	fmt.Println("switchyard is uninstalled from this node")
	if *wait {
		<-ctx.Done()
	}
	return nil
}
