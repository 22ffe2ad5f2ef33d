package ovsdb

import (
	"context"
	"fmt"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"switchyard.dev/switchyard/host/ovsdb/vswitchd"
)

// EnsureRoot creates the Open_vSwitch root row in a fresh database, as
// `ovs-vsctl init` does; ovs-vswitchd reads its configuration from that row
// and the host refuses a database without it. An existing row is left as
// it is. The OVS DaemonSet's entrypoint calls it after creating the db.
func (c *Client) EnsureRoot(ctx context.Context) error {
	var rows []vswitchd.OpenvSwitch
	if err := c.c.List(ctx, &rows); err != nil {
		return err
	}
	if len(rows) > 0 {
		return nil
	}
	ops, err := c.c.Create(&vswitchd.OpenvSwitch{UUID: "root"})
	if err != nil {
		return err
	}
	if err := c.transact(ctx, "create the Open_vSwitch row", ops...); err != nil {
		return err
	}
	c.log.Info("initialised the OVS database", "table", "Open_vSwitch")
	return nil
}

// DeleteBridge removes the client's bridge from the switch; OVSDB
// garbage-collects its Port and Interface rows and ovs-vswitchd removes
// the datapath ports. A missing bridge is not an error. Uninstall uses it.
func (c *Client) DeleteBridge(ctx context.Context) (bool, error) {
	br, err := c.getBridge(ctx)
	if err != nil || br == nil {
		return false, err
	}
	root, err := c.root(ctx)
	if err != nil {
		return false, err
	}
	mut, err := c.c.Where(root).Mutate(root, model.Mutation{Field: &root.Bridges, Mutator: ovsdb.MutateOperationDelete, Value: []string{br.UUID}})
	if err != nil {
		return false, err
	}
	if err := c.transact(ctx, fmt.Sprintf("delete bridge %s", c.bridge), mut...); err != nil {
		return false, err
	}
	c.log.Info("deleted bridge", "bridge", c.bridge)
	return true, nil
}

// BridgeExists reports whether the client's bridge is in the database.
func (c *Client) BridgeExists(ctx context.Context) (bool, error) {
	br, err := c.getBridge(ctx)
	return br != nil, err
}

// SetOVSVersion records the ovs-vswitchd version in Open_vSwitch.ovs_version,
// as Open vSwitch's own start script does (ovs-vswitchd does not write it);
// the agent decides version-dependent settings (userspace TSO) from it.
func (c *Client) SetOVSVersion(ctx context.Context, v string) error {
	root, err := c.root(ctx)
	if err != nil {
		return err
	}
	if root.OVSVersion != nil && *root.OVSVersion == v {
		return nil
	}
	root.OVSVersion = &v
	ops, err := c.c.Where(root).Update(root, &root.OVSVersion)
	if err != nil {
		return err
	}
	return c.transact(ctx, "set ovs_version", ops...)
}
