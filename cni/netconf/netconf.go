package netconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// DefaultSocket is where the agent host serves the CNI gRPC API unless the
// network configuration names another path.
const DefaultSocket = "/var/run/switchyard/cni.sock"

// DefaultTimeout bounds one call to the agent. Kubelet retries a failed ADD,
// so waiting longer than this only delays the retry.
const DefaultTimeout = 2 * time.Minute

// SupportedVersions are the CNI spec versions the binary accepts and can
// convert its results to.
var SupportedVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// ErrInvalid marks every validation failure, so callers can map it to the
// CNI "invalid network config" code with errors.Is.
var ErrInvalid = errors.New("invalid switchyard network config")

// NetConf is the switchyard plugin entry of a conflist.
type NetConf struct {
	types.PluginConf

	// Socket is the agent's CNI socket; DefaultSocket when empty.
	Socket string `json:"socket,omitempty"`
	// MTU of the pod interface; 0 lets the agent use the node's MTU.
	MTU int `json:"mtu,omitempty"`
	// TimeoutSeconds bounds one call to the agent; 0 means DefaultTimeout.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

// Timeout returns the effective per-call timeout.
func (c *NetConf) Timeout() time.Duration {
	if c.TimeoutSeconds == 0 {
		return DefaultTimeout
	}
	return time.Duration(c.TimeoutSeconds) * time.Second
}

// Parse decodes and validates data. Defaults are filled in, so the returned
// Socket is never empty. Every error wraps ErrInvalid and says which field
// is wrong and what a valid value looks like.
func Parse(data []byte) (*NetConf, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: stdin is empty; the runtime must pass the network config as JSON on stdin", ErrInvalid)
	}
	var c NetConf
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%w: not valid JSON (%v); check the conflist in the CNI config dir", ErrInvalid, err)
	}
	if c.CNIVersion == "" {
		return nil, fmt.Errorf("%w: \"cniVersion\" is missing; set it to one of %v", ErrInvalid, SupportedVersions)
	}
	if !slices.Contains(SupportedVersions, c.CNIVersion) {
		return nil, fmt.Errorf("%w: cniVersion %q is not supported; use one of %v", ErrInvalid, c.CNIVersion, SupportedVersions)
	}
	if c.Name == "" {
		return nil, fmt.Errorf("%w: \"name\" is missing; every CNI network needs a name", ErrInvalid)
	}
	if c.Socket == "" {
		c.Socket = DefaultSocket
	}
	if !filepath.IsAbs(c.Socket) {
		return nil, fmt.Errorf("%w: \"socket\" %q must be an absolute path to the agent's unix socket", ErrInvalid, c.Socket)
	}
	// sockaddr_un holds 108 bytes including the terminating NUL.
	if len(c.Socket) > 107 {
		return nil, fmt.Errorf("%w: \"socket\" path is %d bytes, unix sockets allow at most 107", ErrInvalid, len(c.Socket))
	}
	if c.MTU != 0 && (c.MTU < 576 || c.MTU > 65535) {
		return nil, fmt.Errorf("%w: \"mtu\" %d is out of range; use 576..65535 or leave it out for the node's MTU", ErrInvalid, c.MTU)
	}
	if c.TimeoutSeconds < 0 || c.TimeoutSeconds > 3600 {
		return nil, fmt.Errorf("%w: \"timeoutSeconds\" %d is out of range; use 1..3600 or leave it out", ErrInvalid, c.TimeoutSeconds)
	}
	return &c, nil
}
