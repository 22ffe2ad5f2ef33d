package ovsrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"switchyard.dev/switchyard/cni/conflist"
	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/host/underlay"
	"switchyard.dev/switchyard/sdk"
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
	// AgentSocket, if set, is switchyard-agent's API socket: while an
	// agent answers there it could recreate what is being removed.
	AgentSocket string
	// WaitGone is how long to wait for Open vSwitch and the agent to stop
	// answering (their pods being deleted) before giving up; 0 refuses at
	// once if they still answer. The uninstall DaemonSet is applied
	// before switchyard.yml is deleted and waits: on the userspace
	// datapath with an underlay the node IP lives on a bridge that passes
	// no packet once ovs-vswitchd is gone, so a pod created after that
	// would never reach the node.
	WaitGone time.Duration
}

// UninstallReport says what Uninstall did.
type UninstallReport struct {
	// BridgeDeleted names the bridge deleted through OVSDB ("" if none).
	BridgeDeleted string
	// Underlays are the underlay bridges whose addresses went back to
	// their uplink and which were deleted.
	Underlays []string
	Removed   []string
}

// Uninstall leaves the node as it was before Switchyard: once the
// switchyard-ovs and agent pods are gone (a running switch is waited for,
// up to WaitGone, or refused, never pulled out from under), it starts the
// node's Open vSwitch from its database once more, gives the node's
// addresses and routes back from every underlay bridge to its uplink,
// deletes those bridges and the integration bridge through OVSDB so
// ovs-vswitchd removes their datapath ports (kernel datapath ports and the
// userspace datapath's tap devices would otherwise outlive the process),
// stops OVS, then removes the database, the OVS run directory, the
// conflist and the CNI binaries Switchyard installed, and the Remove
// directories.
func Uninstall(ctx context.Context, u UninstallOptions) (UninstallReport, error) {
	o := u.OVS
	o.defaults()
	var rep UninstallReport
	if err := waitGone(ctx, u, o); err != nil {
		return rep, err
	}
	if _, err := os.Stat(o.dbFile()); err == nil {
		taps, err := deleteBridges(ctx, o, &rep)
		if err != nil {
			return rep, err
		}
		removeTaps(o, taps)
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
		if err := removeDir(d); err != nil {
			return rep, fmt.Errorf("removing %s: %w", d, err)
		}
		rep.Removed = append(rep.Removed, d)
	}
	return rep, nil
}

// removeDir removes d with its contents. A d that is a mount point (a
// node may keep /var/lib/switchyard on a volume of its own) cannot go
// itself: emptied is removed enough.
func removeDir(d string) error {
	err := os.RemoveAll(d)
	if errors.Is(err, syscall.EBUSY) {
		if ents, rerr := os.ReadDir(d); rerr == nil && len(ents) == 0 {
			return nil
		}
	}
	return err
}

// waitGone waits until neither Open vSwitch nor the agent answers on the
// node, for at most u.WaitGone.
func waitGone(ctx context.Context, u UninstallOptions, o Options) error {
	// Each daemon on its own: the switchyard-ovs pod stops ovs-vswitchd
	// before ovsdb-server, and an ovsdb-server on its way out may still
	// hold the database lock after its socket went quiet.
	busy := func() string {
		if answers(filepath.Join(o.RunDir, "ovs-vswitchd.ctl"), "version") == nil {
			return "ovs-vswitchd still answers in " + o.RunDir
		}
		if answers(filepath.Join(o.RunDir, "db.sock"), "list_dbs") == nil {
			return "Open vSwitch still answers in " + o.RunDir
		}
		if dbLocked(o.dbFile()) {
			return "ovsdb-server still holds the lock of " + o.dbFile()
		}
		if u.AgentSocket != "" {
			if c, err := net.DialTimeout("unix", u.AgentSocket, time.Second); err == nil {
				c.Close()
				return "switchyard-agent still answers on " + u.AgentSocket
			}
		}
		return ""
	}
	why := busy()
	if why == "" {
		return nil
	}
	if u.WaitGone <= 0 {
		return fmt.Errorf("%s: delete switchyard.yml (kubectl delete -f switchyard.yml) before uninstalling", why)
	}
	o.Log.Info("waiting for Switchyard's pods to be deleted from this node (kubectl delete -f switchyard.yml)", "now", why, "at_most", u.WaitGone)
	ctx, cancel := context.WithTimeout(ctx, u.WaitGone)
	defer cancel()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for why != "" {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s after waiting %v: delete switchyard.yml (kubectl delete -f switchyard.yml) to uninstall", why, u.WaitGone)
		case <-tick.C:
		}
		why = busy()
	}
	o.Log.Info("Open vSwitch and the agent are gone from this node; uninstalling")
	return nil
}

// deleteBridges runs OVS from the node's database just long enough to
// give the node's addresses back from every underlay bridge to its uplink
// and delete those bridges and the integration bridge.
// It returns the names of the bridges' internal interfaces, which on the
// userspace datapath are tap devices of ovs-vswitchd's.
func deleteBridges(ctx context.Context, o Options, rep *UninstallReport) (taps []string, err error) {
	sw, err := Start(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("starting OVS to delete %s: %w", o.Bridge, err)
	}
	defer sw.Stop()
	c, err := ovsdb.Dial(ctx, o.DBSocket(), o.Bridge, o.Log)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ports, err := c.Ports(ctx, "")
	if err != nil {
		return nil, err
	}
	var pairs []string
	for _, p := range ports {
		if p.Type == "internal" {
			taps = append(taps, p.Name)
		}
		if p.Type == "" && p.ExternalIDs[sdk.ExternalIDNodeVeth] == "true" {
			pairs = append(pairs, p.Name)
		}
	}
	// The userspace datapath's own port.
	taps = append(taps, "ovs-netdev")
	if err := deleteBridgesOf(ctx, o, c, rep); err != nil {
		return taps, err
	}
	removeNodeVeths(o, pairs)
	return taps, nil
}

// removeNodeVeths deletes the veth pairs whose both ends a plugin kept in
// the node's netns (sdk.ExternalIDNodeVeth): unlike a pod's, no sandbox
// teardown takes them. Only veths are touched.
func removeNodeVeths(o Options, names []string) {
	removeLinks(o, names, "veth", "a veth pair a plugin kept on the node")
}

// deleteBridgesOf is deleteBridges' work once OVS runs: the addresses back
// to the uplinks, then the underlay bridges and the integration bridge.
func deleteBridgesOf(ctx context.Context, o Options, c *ovsdb.Client, rep *UninstallReport) error {
	underlays, err := c.UnderlayBridges(ctx)
	if err != nil {
		return err
	}
	// The addresses go back first: deleting a bridge deletes its
	// interface, and the node IP with it.
	for _, u := range underlays {
		if u.Uplink == "" {
			continue
		}
		if _, err := underlay.Restore(u.Bridge, u.Uplink, o.Log); err != nil {
			return err
		}
	}
	for _, u := range underlays {
		uc, err := ovsdb.Dial(ctx, o.DBSocket(), u.Bridge, o.Log)
		if err != nil {
			return err
		}
		_, err = uc.DeleteBridge(ctx)
		uc.Close()
		if err != nil {
			return err
		}
		if err := waitBridgeGone(ctx, o, u.Bridge); err != nil {
			return err
		}
		rep.Underlays = append(rep.Underlays, u.Bridge)
	}
	deleted, err := c.DeleteBridge(ctx)
	if err != nil {
		return err
	}
	// ovs-vswitchd removes the datapath ports when it applies the change;
	// wait for it to have done so before stopping it.
	if err := waitBridgeGone(ctx, o, o.Bridge); err != nil {
		return err
	}
	if deleted {
		rep.BridgeDeleted = o.Bridge
	}
	return nil
}

// removeTaps deletes the tap devices of the deleted bridges that
// outlived ovs-vswitchd. It removes them itself as it tears a bridge down,
// but not always before the uninstall has stopped it (seen on a real
// node: every tap left while the bridges were gone from the database), and
// they are persistent: nobody else would ever delete them. Only tun/tap
// devices are touched, never an interface of the node's.
func removeTaps(o Options, names []string) {
	removeLinks(o, names, "tuntap", "a tap device Open vSwitch left")
}

// removeLinks deletes the links of names that are of type kind (what
// names them in the log); others, and missing ones, are left alone.
func removeLinks(o Options, names []string, kind, what string) {
	for _, name := range names {
		l, err := netlink.LinkByName(name)
		if err != nil || l.Type() != kind {
			continue
		}
		if err := netlink.LinkDel(l); err != nil {
			o.Log.Warn("could not delete "+what, "device", name, "error", err)
			continue
		}
		o.Log.Info("deleted "+what, "device", name)
	}
}

// waitBridgeGone waits until ovs-vswitchd closed the bridge's OpenFlow
// management socket, which it does when it tears the bridge down.
func waitBridgeGone(ctx context.Context, o Options, bridge string) error {
	mgmt := filepath.Join(o.RunDir, bridge+".mgmt")
	return pollUntil(ctx, func() bool {
		_, err := os.Stat(mgmt)
		return errors.Is(err, os.ErrNotExist)
	}, fmt.Sprintf("ovs-vswitchd to remove bridge %s (%s still there)", bridge, mgmt))
}

// dbLocked reports whether a process holds the lock ovsdb-server takes on
// its database (an fcntl lock on .<name>.~lock~ beside it).
func dbLocked(db string) bool {
	f, err := os.Open(filepath.Join(filepath.Dir(db), "."+filepath.Base(db)+".~lock~"))
	if err != nil {
		return false
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return false
	}
	return lk.Type != unix.F_UNLCK
}
