package pipeline

import (
	"fmt"
	"maps"
	"sync"

	"switchyard.dev/switchyard/sdk"
)

// PortGrant is who may output to an OpenFlow port: its owner (the plugin
// that created it through the host; "" for the host's own ports, which
// everyone may use), and everyone if it is exported.
type PortGrant struct {
	Name     string
	Owner    string
	Exported bool
}

// reservedPorts starts the OpenFlow reserved port numbers (IN_PORT, TABLE,
// NORMAL, FLOOD, ALL, CONTROLLER, LOCAL, ANY), which every plugin may use.
const reservedPorts = 0xffffff00

// portBook maps port numbers to their grants. Ports come and go with pods,
// independently of the layout, so the book has its own lock: recording a
// pod's port must never wait for a batch in flight.
type portBook struct {
	mu   sync.RWMutex
	byNo map[uint32]PortGrant
}

// SetPort records the owner of port number no (after the host created it,
// or found it at start).
func (a *Arbiter) SetPort(no uint32, g PortGrant) {
	a.ports.mu.Lock()
	defer a.ports.mu.Unlock()
	for n, o := range a.ports.byNo { // a port renumbered by OVS
		if o.Name == g.Name {
			delete(a.ports.byNo, n)
		}
	}
	a.ports.byNo[no] = g
}

// Port says who holds an OpenFlow port number.
func (a *Arbiter) Port(no uint32) (PortGrant, bool) {
	a.ports.mu.RLock()
	defer a.ports.mu.RUnlock()
	g, ok := a.ports.byNo[no]
	return g, ok
}

// Ports lists the recorded ports by number.
func (a *Arbiter) Ports() map[uint32]PortGrant {
	a.ports.mu.RLock()
	defer a.ports.mu.RUnlock()
	return maps.Clone(a.ports.byNo)
}

// ForgetPort drops the record of the port named name (it was deleted).
func (a *Arbiter) ForgetPort(name string) {
	a.ports.mu.Lock()
	defer a.ports.mu.Unlock()
	for n, o := range a.ports.byNo {
		if o.Name == name {
			delete(a.ports.byNo, n)
		}
	}
}

// checkOutput refuses an output to a port that belongs to another plugin
// and is not exported. Reserved ports, the host's ports and port numbers
// no port holds are allowed: an output to a missing port drops the packet,
// which hurts no one else.
func (a *Arbiter) checkOutput(owner, where string, no uint32) error {
	if no >= reservedPorts {
		return nil
	}
	a.ports.mu.RLock()
	g, known := a.ports.byNo[no]
	a.ports.mu.RUnlock()
	if !known || g.Exported || g.Owner == owner || g.Owner == "" {
		return nil
	}
	return fmt.Errorf("%w: plugin %q: %s outputs to port %d (%q), which belongs to plugin %q and is not exported; output only to your own ports, or have %q create the port with PortRequest.Exported",
		sdk.ErrNotOwner, owner, where, no, g.Name, g.Owner, g.Owner)
}
