package ifstore

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
)

// PortView is the slice of OVS the reconciler needs: the current OpenFlow
// port number of a port by name, or found=false when OVS has no such port.
type PortView interface {
	OFPort(ctx context.Context, name string) (ofport uint32, found bool, err error)
}

// IPAMView lists the addresses an IPAM holds, by attachment. It is
// optional: the IPAM may live in a plugin the host cannot see into.
type IPAMView interface {
	Allocations(ctx context.Context) (map[Key][]netip.Addr, error)
}

// Report says what Reconcile found and did.
type Report struct {
	// Stale records were dropped because their OVS port no longer exists.
	Stale []Interface
	// Renumbered records had their ofport updated.
	Renumbered []Interface
	// Leaked are IPAM allocations with no record; the IPAM owner should
	// release them (CNI GC does).
	Leaked []Key
	// Mismatched records disagree with the IPAM about their addresses.
	Mismatched []Key
}

// Reconcile compares the store with OVS (and, if ipam is not nil, with the
// IPAM) after an agent start. Records whose port is gone are removed and
// published as Deleted so plugins drop their flows; ofport changes (a port
// re-created while the agent was down) are published as a Deleted and an
// Added event. IPAM differences are only reported.
func (s *Store) Reconcile(ctx context.Context, ports PortView, ipam IPAMView) (Report, error) {
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
	if ipam == nil {
		return rep, nil
	}
	allocs, err := ipam.Allocations(ctx)
	if err != nil {
		return rep, fmt.Errorf("reading IPAM allocations: %w", err)
	}
	for k, ips := range allocs {
		rec, ok := s.Get(k)
		if !ok {
			rep.Leaked = append(rep.Leaked, k)
			continue
		}
		a, b := slices.Clone(ips), slices.Clone(rec.IPs)
		slices.SortFunc(a, netip.Addr.Compare)
		slices.SortFunc(b, netip.Addr.Compare)
		if !slices.Equal(a, b) {
			rep.Mismatched = append(rep.Mismatched, k)
		}
	}
	for _, l := range [][]Key{rep.Leaked, rep.Mismatched} {
		slices.SortFunc(l, func(a, b Key) int { return compareKey(a, b) })
	}
	return rep, nil
}

func compareKey(a, b Key) int {
	if a.ContainerID != b.ContainerID {
		if a.ContainerID < b.ContainerID {
			return -1
		}
		return 1
	}
	switch {
	case a.IfName < b.IfName:
		return -1
	case a.IfName > b.IfName:
		return 1
	}
	return 0
}
