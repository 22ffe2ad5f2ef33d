package config

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// Datapath types of the integration bridge.
const (
	// DatapathAuto picks DatapathSystem where the OVS kernel module exists
	// and DatapathNetdev elsewhere (DetectDatapath).
	DatapathAuto = "auto"
	// DatapathSystem is the OVS kernel datapath.
	DatapathSystem = "system"
	// DatapathNetdev is the userspace datapath of ovs-vswitchd.
	DatapathNetdev = "netdev"
)

// Host is where DetectDatapath looks: the root of /sys and /lib/modules
// and the running kernel's release. Tests point it at a fake tree.
type Host struct {
	SysRoot     string // "/sys"
	ModulesRoot string // "/lib/modules"
	Release     string // uname -r
}

// ThisHost is the running machine.
func ThisHost() Host {
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return Host{SysRoot: "/sys", ModulesRoot: "/lib/modules", Release: strings.TrimSpace(string(rel))}
}

// DetectDatapath returns DatapathSystem when the node can run the OVS
// kernel datapath (the openvswitch module is loaded, or built for the
// running kernel so ovs-vswitchd's startup can load it), else
// DatapathNetdev. The kernel datapath is faster and needs none of the
// userspace datapath's offload settings, so it wins whenever it exists.
func DetectDatapath(h Host) string {
	if _, err := os.Stat(filepath.Join(h.SysRoot, "module", "openvswitch")); err == nil {
		return DatapathSystem
	}
	if h.Release == "" {
		return DatapathNetdev
	}
	f, err := os.Open(filepath.Join(h.ModulesRoot, h.Release, "modules.dep"))
	if err != nil {
		return DatapathNetdev
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		mod, _, _ := strings.Cut(sc.Text(), ":")
		base := filepath.Base(mod)
		if base == "openvswitch.ko" || strings.HasPrefix(base, "openvswitch.ko.") {
			return DatapathSystem
		}
	}
	return DatapathNetdev
}
