package ovsrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"switchyard.dev/switchyard/cni/conflist"
	"switchyard.dev/switchyard/host/ovsdb"
)

// UninstallOptions say what to remove from a node.
type UninstallOptions struct {
	// OVS is the switch as switchyard-ovs ran it; its database and run
	// directory are removed after the bridge is deleted.
	OVS Options
	// CNI names the conflist and bin directory install-cni wrote to.
	CNI conflist.Options
	// Remove are further directories Switchyard created on the node
	// (its run and state directories), removed with their contents.
	Remove []string
}

// UninstallReport says what Uninstall did.
type UninstallReport struct {
	// BridgeDeleted names the bridge deleted through OVSDB ("" if none).
	BridgeDeleted string
	Removed       []string
}

// Uninstall leaves the node as it was before Switchyard: it starts the
// node's Open vSwitch from its database once more (the switchyard-ovs pod
// must be gone already; a running switch is refused rather than pulled
// out from under), deletes the integration bridge through OVSDB so
// ovs-vswitchd removes its datapath ports (on the kernel datapath they
// would otherwise outlive the process), stops OVS, then removes the
// database, the OVS run directory, the conflist and the CNI binaries
// Switchyard installed, and the Remove directories.
func Uninstall(ctx context.Context, u UninstallOptions) (UninstallReport, error) {
	o := u.OVS
	o.defaults()
	var rep UninstallReport
	if Probe(o.RunDir) == nil {
		return rep, fmt.Errorf("Open vSwitch still answers in %s: delete the switchyard-ovs DaemonSet (kubectl delete -f switchyard.yml) before uninstalling", o.RunDir)
	}
	if _, err := os.Stat(o.dbFile()); err == nil {
		deleted, err := deleteBridge(ctx, o)
		if err != nil {
			return rep, err
		}
		if deleted {
			rep.BridgeDeleted = o.Bridge
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return rep, err
	} else {
		o.Log.Info("no OVS database: nothing to delete in OVS", "db", o.dbFile())
	}
	removed, err := conflist.Uninstall(u.CNI)
	rep.Removed = append(rep.Removed, removed...)
	if err != nil {
		return rep, err
	}
	for _, d := range append([]string{o.DBDir, o.RunDir}, u.Remove...) {
		if _, err := os.Lstat(d); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			return rep, fmt.Errorf("removing %s: %w", d, err)
		}
		rep.Removed = append(rep.Removed, d)
	}
	return rep, nil
}

// deleteBridge runs OVS from the node's database just long enough to
// delete the bridge.
func deleteBridge(ctx context.Context, o Options) (bool, error) {
	sw, err := Start(ctx, o)
	if err != nil {
		return false, fmt.Errorf("starting OVS to delete %s: %w", o.Bridge, err)
	}
	defer sw.Stop()
	c, err := ovsdb.Dial(ctx, o.DBSocket(), o.Bridge, o.Log)
	if err != nil {
		return false, err
	}
	defer c.Close()
	deleted, err := c.DeleteBridge(ctx)
	if err != nil {
		return false, err
	}
	// ovs-vswitchd removes the datapath ports when it applies the change;
	// wait for it to have done so before stopping it.
	if err := waitBridgeGone(ctx, o); err != nil {
		return deleted, err
	}
	return deleted, nil
}

// waitBridgeGone waits until ovs-vswitchd closed the bridge's OpenFlow
// management socket, which it does when it tears the bridge down.
func waitBridgeGone(ctx context.Context, o Options) error {
	mgmt := filepath.Join(o.RunDir, o.Bridge+".mgmt")
	return pollUntil(ctx, func() bool {
		_, err := os.Stat(mgmt)
		return errors.Is(err, os.ErrNotExist)
	}, fmt.Sprintf("ovs-vswitchd to remove bridge %s (%s still there)", o.Bridge, mgmt))
}
