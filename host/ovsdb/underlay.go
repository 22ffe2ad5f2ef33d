package ovsdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"switchyard.dev/switchyard/host/ovsdb/vswitchd"
)

// UnderlaySpec describes the underlay bridge: a bridge (never br-int) whose
// internal port holds the node IP and whose one other port is the physical
// uplink. On the userspace datapath ovs-vswitchd encapsulates and
// decapsulates tunnel packets only for addresses that live on such a
// bridge's internal port; it then sends and receives them through the
// uplink port.
type UnderlaySpec struct {
	// Bridge is the bridge's name, which is also its internal interface's.
	Bridge string
	// Uplink is the interface that carried the node IP before (eth0).
	Uplink string
	// DatapathType must match br-int's (netdev).
	DatapathType string
	// HWAddr, if set, is given to the internal interface (other_config:hwaddr),
	// so peers' neighbour entries for the node IP stay valid after the move.
	HWAddr string
	// MTU, if non-zero, is requested for the internal interface.
	MTU int
}

// EnsureUnderlayBridge creates the underlay bridge with its internal port and
// the uplink port if they are missing. The bridge keeps OVS's default
// fail_mode (standalone, one NORMAL flow): it is a plain learning switch
// between the node's stack and the wire, nobody programs it. Running it
// again changes nothing.
func (c *Client) EnsureUnderlayBridge(ctx context.Context, s UnderlaySpec) error {
	if s.Bridge == "" || s.Uplink == "" {
		return fmt.Errorf("underlay bridge: bridge and uplink names are required (got %q, %q)", s.Bridge, s.Uplink)
	}
	if s.Bridge == c.bridge {
		return fmt.Errorf("underlay bridge %q is the integration bridge; name another bridge (e.g. br-phy)", s.Bridge)
	}
	br := &vswitchd.Bridge{Name: s.Bridge}
	err := c.c.Get(ctx, br)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return c.createUnderlay(ctx, s)
	case err != nil:
		return err
	}
	// The bridge exists (an agent restart): make sure the uplink is its port.
	p := &vswitchd.Port{Name: s.Uplink}
	if err := c.c.Get(ctx, p); err == nil {
		return nil
	} else if !errors.Is(err, client.ErrNotFound) {
		return err
	}
	iface := &vswitchd.Interface{UUID: "uplink_iface", Name: s.Uplink, ExternalIDs: map[string]string{OwnerKey: HostOwner}}
	port := &vswitchd.Port{UUID: "uplink_port", Name: s.Uplink, Interfaces: []string{iface.UUID}}
	ops, err := c.c.Create(iface, port)
	if err != nil {
		return err
	}
	mut, err := c.c.Where(br).Mutate(br, model.Mutation{Field: &br.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{port.UUID}})
	if err != nil {
		return err
	}
	c.log.Info("added the uplink to the underlay bridge", "bridge", s.Bridge, "uplink", s.Uplink)
	return c.transact(ctx, "add uplink "+s.Uplink+" to "+s.Bridge, append(ops, mut...)...)
}

func (c *Client) createUnderlay(ctx context.Context, s UnderlaySpec) error {
	root, err := c.root(ctx)
	if err != nil {
		return err
	}
	owner := map[string]string{OwnerKey: HostOwner}
	local := &vswitchd.Interface{UUID: "local_iface", Name: s.Bridge, Type: "internal", ExternalIDs: owner}
	if s.MTU > 0 {
		mtu := s.MTU
		local.MTURequest = &mtu
	}
	localPort := &vswitchd.Port{UUID: "local_port", Name: s.Bridge, Interfaces: []string{local.UUID}}
	up := &vswitchd.Interface{UUID: "uplink_iface", Name: s.Uplink, ExternalIDs: owner}
	upPort := &vswitchd.Port{UUID: "uplink_port", Name: s.Uplink, Interfaces: []string{up.UUID}}
	nb := &vswitchd.Bridge{UUID: "bridge", Name: s.Bridge, Ports: []string{localPort.UUID, upPort.UUID},
		DatapathType: s.DatapathType, ExternalIDs: owner}
	if s.HWAddr != "" {
		nb.OtherConfig = map[string]string{"hwaddr": s.HWAddr}
	}
	if err := c.addBridge(ctx, root, nb, local, localPort, up, upPort); err != nil {
		return err
	}
	c.log.Info("created the underlay bridge", "bridge", s.Bridge, "uplink", s.Uplink, "datapath_type", s.DatapathType, "hwaddr", s.HWAddr)
	return nil
}

// UnderlayBridge is an underlay bridge found in the database and its uplink.
type UnderlayBridge struct {
	Bridge, Uplink string
}

// UnderlayBridges lists the underlay bridges the agent made
// (EnsureUnderlayBridge): the bridges other than the client's that the
// host owns, each with its one port besides its own internal one. The
// uninstall needs them to give the node's addresses back to the uplink.
func (c *Client) UnderlayBridges(ctx context.Context) ([]UnderlayBridge, error) {
	var bridges []vswitchd.Bridge
	if err := c.c.List(ctx, &bridges); err != nil {
		return nil, err
	}
	var out []UnderlayBridge
	for _, b := range bridges {
		if b.Name == c.bridge || b.ExternalIDs[OwnerKey] != HostOwner {
			continue
		}
		u := UnderlayBridge{Bridge: b.Name}
		for _, uuid := range b.Ports {
			p := &vswitchd.Port{UUID: uuid}
			if err := c.c.Get(ctx, p); err != nil {
				return nil, fmt.Errorf("port %s of bridge %s: %w", uuid, b.Name, err)
			}
			if p.Name != b.Name {
				u.Uplink = p.Name
			}
		}
		out = append(out, u)
	}
	return out, nil
}
