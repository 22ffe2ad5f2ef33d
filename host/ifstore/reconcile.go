package ifstore

import (
	"context"
	"fmt"
)

// PortView is the slice of OVS the reconciler needs: the current OpenFlow
// port number of a port by name, or found=false when OVS has no such port.
type PortView interface {
	OFPort(ctx context.Context, name string) (ofport uint32, found bool, err error)
}

// Report says what Reconcile found and did.
type Report struct {
	// Stale records were dropped because their OVS port no longer exists.
	Stale []Interface
	// Renumbered records had their ofport updated.
	Renumbered []Interface
}

// Reconcile compares the store with OVS after an agent start. Records
// whose port is gone are removed and published as Deleted so plugins drop
// their flows; ofport changes (a port re-created while the agent was down)
// are published as a Deleted and an Added event. The IPAM lives in the CNI
// plugin, which reconciles it with these records when it starts
// (sdk.StartRequest.Attachments): the host cannot see into it.
func (s *Store) Reconcile(ctx context.Context, ports PortView) (Report, error) {
	var rep Report
	for _, i := range s.List() {
		ofport, found, err := ports.OFPort(ctx, i.HostIfName)
		if err != nil {
			return rep, fmt.Errorf("reconciling %s (pod %s): %w", i.Key(), i.Pod(), err)
		}
		switch {
		case !found:
			if _, _, err := s.Delete(i.Key()); err != nil {
				return rep, err
			}
			rep.Stale = append(rep.Stale, i)
			s.log.Warn("pod interface lost its OVS port while the agent was down; record dropped", "pod", i.Pod(), "container", i.ContainerID, "port", i.HostIfName)
		case ofport != i.OFPort:
			if _, _, err := s.Delete(i.Key()); err != nil {
				return rep, err
			}
			old := i.OFPort
			i.OFPort = ofport
			if err := s.Put(i); err != nil {
				return rep, err
			}
			rep.Renumbered = append(rep.Renumbered, i)
			s.log.Info("pod interface renumbered", "pod", i.Pod(), "port", i.HostIfName, "old_ofport", old, "ofport", ofport)
		}
	}
	return rep, nil
}
