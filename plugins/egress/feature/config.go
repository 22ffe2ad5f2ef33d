package feature

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// Defaults.
const (
	DefaultDevice         = "sy-egress0"
	DefaultGateway        = "sy-gw0"
	DefaultMemberlistPort = 7946
	DefaultRouteTableBase = 1100
)

// Config is egress's section of the agent config.
type Config struct {
	// Device is the dummy device that holds this node's Egress IPs.
	Device string `json:"device,omitempty"`
	// Gateway is podnet's gateway device.
	Gateway string `json:"gateway,omitempty"`
	// ServiceCIDRs are never SNATed (Service traffic stays in the cluster).
	ServiceCIDRs []netip.Prefix `json:"serviceCIDRs,omitempty"`
	// ExceptCIDRs are more destinations Egress leaves alone.
	ExceptCIDRs []netip.Prefix `json:"exceptCIDRs,omitempty"`
	// MemberlistPort is the TCP and UDP port the agents' memberlist uses
	// on the node IP.
	MemberlistPort int `json:"memberlistPort,omitempty"`
	// RouteTableBase: the routing tables RouteTableBase+1 to
	// RouteTableBase+255 are the plugin's, one per Egress IP held here
	// whose ExternalIPPool has subnetInfo (the traffic of that IP leaves
	// through the subnet's gateway); nothing else may use them.
	RouteTableBase int `json:"routeTableBase,omitempty"`
}

// ParseConfig reads and checks the config section; an error names the key.
func ParseConfig(b []byte) (Config, error) {
	c := Config{}
	if len(b) > 0 && string(b) != "null" {
		if err := json.Unmarshal(b, &c); err != nil {
			return c, fmt.Errorf("egress config: %w (serviceCIDRs and exceptCIDRs take CIDRs such as 10.96.0.0/12)", err)
		}
	}
	if c.Device == "" {
		c.Device = DefaultDevice
	}
	if c.Gateway == "" {
		c.Gateway = DefaultGateway
	}
	if c.MemberlistPort == 0 {
		c.MemberlistPort = DefaultMemberlistPort
	}
	if c.RouteTableBase == 0 {
		c.RouteTableBase = DefaultRouteTableBase
	}
	if c.RouteTableBase < 256 || c.RouteTableBase > maxRouteTableBase {
		return c, fmt.Errorf("egress config routeTableBase: %d is out of range: give 256 to %d, so that tables base+1 to base+255 miss the kernel's own (253-255)",
			c.RouteTableBase, maxRouteTableBase)
	}
	if c.MemberlistPort < 1 || c.MemberlistPort > 65535 {
		return c, fmt.Errorf("egress config memberlistPort: %d is not a port (1-65535)", c.MemberlistPort)
	}
	if len(c.Device) > 15 {
		return c, fmt.Errorf("egress config device: %q is longer than 15 characters (a Linux interface name)", c.Device)
	}
	return c, nil
}
