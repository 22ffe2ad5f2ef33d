package ovsrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"switchyard.dev/switchyard/host/config"
)

// ErrNoKernelDatapath says the system datapath was asked for on a node
// whose kernel has no Open vSwitch datapath.
var ErrNoKernelDatapath = errors.New("the Open vSwitch kernel datapath is not available on this node (no ovs_datapath generic netlink family: the openvswitch module is not loaded)")

// kernelDatapathRemedy is what an operator can do about ErrNoKernelDatapath.
const kernelDatapathRemedy = "load the module on the node (modprobe openvswitch), or set bridge.datapathType to netdev (or auto) in the switchyard-agent-config ConfigMap and delete this pod"

// KernelDatapath checks that the kernel answers for the Open vSwitch
// datapath, the way ovs-vswitchd reaches it: through the "ovs_datapath"
// generic netlink family, which exists whether the module was loaded or
// built in (a /sys/module entry is not always there for built-ins).
func KernelDatapath() error {
	if _, err := netlink.GenlFamilyGet("ovs_datapath"); err != nil {
		return ErrNoKernelDatapath
	}
	return nil
}

// unavailableFile, in the run dir, holds why this node's switch cannot
// start while switchyard-ovs waits for it to become possible. Probe reports
// it (the pod is not ready, with the reason in its events); the liveness
// probe accepts it (waiting is what the process should do, so restarting
// it would only add a crash loop).
const unavailableFile = "switchyard-ovs.unavailable"

// WaitForDatapath returns once the datapath of o can work: at once for
// netdev; for system, when the kernel datapath answers. Until then it
// records why in the run dir and logs it with what to do, again every
// minute, so `kubectl describe` and `kubectl logs` both say it.
func WaitForDatapath(ctx context.Context, o Options, check func() error, every time.Duration) error {
	o.defaults()
	marker := filepath.Join(o.RunDir, unavailableFile)
	if o.DatapathType != config.DatapathSystem {
		os.Remove(marker) // an earlier container's, under another config
		return nil
	}
	var logged time.Time
	for {
		err := check()
		if err == nil {
			if _, serr := os.Stat(marker); serr == nil {
				o.Log.Info("the kernel datapath is available now; starting Open vSwitch")
			}
			os.Remove(marker)
			return nil
		}
		if err := os.MkdirAll(o.RunDir, 0o755); err != nil {
			return err
		}
		msg := fmt.Sprintf("bridge.datapathType is system, but %v: %s", err, kernelDatapathRemedy)
		if werr := os.WriteFile(marker, []byte(msg), 0o644); werr != nil {
			return fmt.Errorf("%s (and recording it in %s: %v)", msg, marker, werr)
		}
		if time.Since(logged) >= time.Minute {
			o.Log.Error("Open vSwitch cannot start; waiting", "datapath_type", o.DatapathType, "reason", err.Error(), "remedy", kernelDatapathRemedy)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// unavailable reports the recorded reason the switch cannot start, or "".
func unavailable(runDir string) string {
	b, err := os.ReadFile(filepath.Join(runDir, unavailableFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Alive is the liveness check: a switchyard-ovs waiting for its datapath
// is alive; otherwise both daemons must answer (Probe).
func Alive(runDir string) error {
	if unavailable(runDir) != "" {
		return nil
	}
	return Probe(runDir)
}
