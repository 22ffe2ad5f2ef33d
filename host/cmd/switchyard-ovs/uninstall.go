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

// uninstall is the init container of manifests/uninstall.yaml: it waits
// (--wait-gone) for Switchyard's pods to be deleted and cleans the node.
// With --wait it then stays up, so the DaemonSet shows every node done
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
	fs.StringVar(&u.AgentSocket, "agent-socket", "", "switchyard-agent's API socket: wait until no agent answers there")
	fs.DurationVar(&u.WaitGone, "wait-gone", 0, "wait this long for Open vSwitch and the agent to be deleted from the node (0: refuse if they still run)")
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
	for _, b := range rep.Underlays {
		fmt.Println("gave the node's addresses back to the uplink and deleted underlay bridge", b)
	}
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
