// Package tpconf is the config the test plugins share: the pod-like ports
// the integration test created and wants wired.
package tpconf

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
)

// Port is one veth whose host end is attached to the bridge.
type Port struct {
	Name   string `json:"name"`
	OFPort uint32 `json:"ofport"`
	IP     string `json:"ip"`
	MAC    string `json:"mac"` // of the namespace end
}

// Config is a test plugin's config section.
type Config struct {
	Ports []Port `json:"ports"`
	// ForeignTable, if set, is a table of another plugin the plugin tries to
	// write into; the host must refuse it.
	ForeignTable string `json:"foreignTable"`
	// ForeignPort, if set, is a port of another plugin (not exported) the
	// plugin tries to output to; the host must refuse it.
	ForeignPort string `json:"foreignPort"`
	// Probe installs a per-incarnation flow so tests can see stale flows swept.
	Probe bool `json:"probe"`
	// Flows adds this many filler flows (benchmarks).
	Flows int `json:"flows"`
	// Batch is the filler batch size.
	Batch int `json:"batch"`
	// Churn, if set, makes beta re-apply that many flows in one batch, back
	// to back, for as long as the file ChurnFile exists (the isolation
	// benchmark's noisy neighbour). After each batch it writes the number
	// of batches so far to ChurnFile+".n"; when it finds the file gone it
	// writes ChurnFile+".idle" and waits for it to come back.
	Churn     int    `json:"churn"`
	ChurnFile string `json:"churnFile"`
	// StartBlock, if set, makes beta's Start write StartBlock+".entered"
	// and wait while the file StartBlock exists (admission tests).
	StartBlock string `json:"startBlock"`
	// EventLog, if set, is where beta appends one line per pod interface
	// event: its pid, whether its Start had returned, kind, container ID.
	EventLog string `json:"eventLog"`
	// Punt, if set, is an IP whose ICMP packets alpha sends to itself
	// (packet-in) and re-injects towards the other port (packet-out).
	Punt string `json:"punt"`
	// Control, if set, is a unix socket path on which gamma serves its
	// read-back and delete-by-tag controls to the test.
	Control string `json:"control"`
}

// Parse decodes and checks a config section.
func Parse(b []byte) (*Config, error) {
	var c Config
	if len(b) > 0 {
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	for i, p := range c.Ports {
		if _, err := netip.ParseAddr(p.IP); err != nil {
			return nil, fmt.Errorf("ports[%d].ip: %w", i, err)
		}
		if _, err := net.ParseMAC(p.MAC); err != nil {
			return nil, fmt.Errorf("ports[%d].mac: %w", i, err)
		}
	}
	return &c, nil
}

// Addr returns the port's IP.
func (p Port) Addr() netip.Addr { return netip.MustParseAddr(p.IP) }

// HW returns the port's MAC.
func (p Port) HW() net.HardwareAddr { m, _ := net.ParseMAC(p.MAC); return m }
