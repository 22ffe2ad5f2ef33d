package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"switchyard.dev/switchyard/host/config"
	"switchyard.dev/switchyard/host/openflow"
	"switchyard.dev/switchyard/host/ovsdb"
	"switchyard.dev/switchyard/host/underlay"
)

// Connect opens OVSDB, makes sure the bridge is set up (and the underlay
// bridge, if the config names one), and connects to the
// bridge's OpenFlow management socket (waiting for ovs-vswitchd to create
// it after a fresh bridge). The caller closes both.
func Connect(ctx context.Context, cfg *config.Config, log *slog.Logger) (*openflow.Conn, *ovsdb.Client, error) {
	db, err := ovsdb.Dial(ctx, cfg.OVS.DBSocket, cfg.Bridge.Name, log.With("component", "ovsdb"))
	if err != nil {
		return nil, nil, err
	}
	if cfg.Bridge.DatapathType == config.DatapathNetdev {
		v, err := db.OVSVersion(ctx)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		if cfg.Bridge.UserspaceTSO == "auto" || cfg.Bridge.UserspaceTSO == "" {
			cfg.Bridge.UserspaceTSO = strconv.FormatBool(TunnelsOffloads(v))
			log.Info("userspace TSO decided by the Open vSwitch version", "ovs_version", v, "userspace_tso", cfg.Bridge.UserspaceTSO)
		}
		if !RevalidatesOverlapsRight(v) {
			log.Warn("this ovs-vswitchd's userspace datapath may keep a cached flow's old actions after a flow table change "+
				"when cached flows overlap (fixed in Open vSwitch 2.17.10, 3.0.5, 3.1.3 and 3.2); plugins whose verdicts change "+
				"must make the old cache unreachable (netpol does, with its epoch); upgrade Open vSwitch to be safe",
				"ovs_version", v)
		}
	}
	if UserspaceTSO(cfg) {
		if err := db.EnableUserspaceTSO(ctx); err != nil {
			db.Close()
			return nil, nil, err
		}
	}
	if err := db.EnsureBridge(ctx, cfg.Bridge.DatapathType); err != nil {
		db.Close()
		return nil, nil, err
	}
	if u := cfg.Underlay; u.Bridge != "" && u.Interface == config.UnderlayAuto && cfg.Bridge.DatapathType != config.DatapathNetdev {
		log.Info("no underlay bridge: the kernel datapath tunnels without one (underlay.interface auto)", "datapath", cfg.Bridge.DatapathType)
	} else if u.Bridge != "" {
		uplink := u.Interface
		if uplink == config.UnderlayAuto {
			ip, _ := netip.ParseAddr(u.NodeIP) // validated
			var err error
			if uplink, err = underlay.DetectUplink(u.Bridge, ip); err != nil {
				db.Close()
				return nil, nil, err
			}
			log.Info("underlay uplink detected", "uplink", uplink, "node_ip", ip, "bridge", u.Bridge)
		}
		err := underlay.Setup(ctx, db, underlay.Spec{Bridge: u.Bridge, Uplink: uplink, DatapathType: cfg.Bridge.DatapathType},
			log.With("component", "underlay"))
		if err != nil {
			db.Close()
			return nil, nil, err
		}
	}
	for {
		sw, err := openflow.Dial(ctx, "unix", cfg.MgmtSocket(), switchOptions(log, true))
		if err == nil {
			return sw, db, nil
		}
		select {
		case <-ctx.Done():
			db.Close()
			return nil, nil, fmt.Errorf("connect to %s: %w (is ovs-vswitchd running?)", cfg.MgmtSocket(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// UnderlayMirror returns the mirror of the underlay bridge's kernel
// routes and neighbours into ovs-vswitchd's own tables, which the netdev
// datapath's tunnels need (see host/underlay), or nil where there is no
// underlay bridge. The caller runs it.
func UnderlayMirror(cfg *config.Config, log *slog.Logger) *underlay.Mirror {
	if cfg.Underlay.Bridge == "" || cfg.Bridge.DatapathType != config.DatapathNetdev {
		return nil
	}
	return &underlay.Mirror{Bridge: cfg.Underlay.Bridge, RunDir: cfg.OVS.RunDir, Log: log.With("component", "underlay")}
}

// UserspaceTSO says whether the agent turns on (and plugins may rely on)
// ovs-vswitchd's userspace TSO: only on the netdev datapath, and only when
// the config asks for it.
func UserspaceTSO(cfg *config.Config) bool {
	return cfg.Bridge.DatapathType == config.DatapathNetdev && cfg.Bridge.UserspaceTSO == "true"
}

// TunnelsOffloads reports whether an ovs-vswitchd of version v (as in
// OVSDB, "3.1.0") tunnels packets that still carry TSO or checksum offload:
// from 3.3 on it does; 3.1 drops them ("Tunneling packets with HW offload
// flags is not supported"), so there userspace TSO would break an overlay.
func TunnelsOffloads(v string) bool {
	major, minor, _, ok := ovsVersion(v)
	return ok && (major > 3 || major == 3 && minor >= 3)
}

// RevalidatesOverlapsRight reports whether the userspace datapath of an
// ovs-vswitchd of version v updates the right cached flow when
// revalidation changes its actions while another cached flow overlaps it.
// Before upstream's fix ("dpif-netdev: Fix dpif_netdev_flow_put", in
// 2.17.10, 3.0.5, 3.1.3 and 3.2.0) it looked the flow up by packet, could
// update the overlapping one instead, and left the right one with its old
// actions for as long as packets kept hitting it.
func RevalidatesOverlapsRight(v string) bool {
	major, minor, patch, ok := ovsVersion(v)
	if !ok {
		return false
	}
	fixedIn := map[[2]int]int{{2, 17}: 10, {3, 0}: 5, {3, 1}: 3}
	if p, listed := fixedIn[[2]int{major, minor}]; listed {
		return patch >= p
	}
	return major > 3 || major == 3 && minor >= 2
}

// ovsVersion parses "major.minor[.patch]" as OVSDB reports it ("3.1.0").
func ovsVersion(v string) (major, minor, patch int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return 0, 0, 0, false
	}
	if len(parts) == 3 {
		// Distribution suffixes ("3.1.0-2") end the number.
		end := strings.IndexFunc(parts[2], func(r rune) bool { return r < '0' || r > '9' })
		if end < 0 {
			end = len(parts[2])
		}
		patch, _ = strconv.Atoi(parts[2][:end])
	}
	return major, minor, patch, true
}

// RemoveOwner removes an owner (a plugin that is no longer enabled, or a
// local owner) with all its flows, groups, meters, ports and tables.
func (a *Agent) RemoveOwner(ctx context.Context, owner string) { a.removePlugin(ctx, owner) }

// reconnectEvery is how often a lost connection to the local switch is
// retried. Dialling a unix socket that is not there yet costs one syscall,
// so the agent retries often and is back (and replays) within this long of
// a restarted ovs-vswitchd's socket appearing, rather than after an
// exponential backoff that grows while the switch is down.
const reconnectEvery = 50 * time.Millisecond

// switchOptions are the OpenFlow options for a connection to the local
// switch: the main one takes async events, batch lanes none.
func switchOptions(log *slog.Logger, events bool) openflow.Options {
	return openflow.Options{Logger: log, AsyncEvents: events, NoAsync: !events, ReconnectMin: reconnectEvery, ReconnectMax: reconnectEvery}
}
