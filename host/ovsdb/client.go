package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"switchyard.dev/switchyard/host/ovsdb/vswitchd"
	"switchyard.dev/switchyard/sdk"
)

// OwnerKey is the external_ids key naming the plugin that created a port.
const OwnerKey = "switchyard-owner"

// HostOwner is the owner recorded on what the agent creates itself (the
// bridges, the underlay uplink), not a plugin.
const HostOwner = "switchyard-agent"

// ExportedKey is the external_ids key ("true") of a port every plugin may
// output to, not only its owner.
const ExportedKey = "switchyard-exported"

// ErrNoPort is returned for a port that does not exist.
var ErrNoPort = errors.New("no such port")

// Client talks to ovsdb-server.
type Client struct {
	c      client.Client
	bridge string
	log    *slog.Logger

	// ifaceChanged is closed (and replaced) whenever the monitored
	// Interface table changes, so WaitOFPort wakes the moment ovs-vswitchd
	// writes an ofport instead of on its next poll.
	ifaceMu      sync.Mutex
	ifaceChanged chan struct{}

	// ofports is every interface's ofport and ofport_request by row,
	// kept from the cache's events: PickOFPort reads it instead of listing
	// the Interface table, which copies every row (4 ms at 100 pods).
	// nextOFPort is where PickOFPort looks for a free number next (0: not
	// started yet).
	ofportMu   sync.Mutex
	ofports    map[string][2]int
	nextOFPort int
}

// noteInterface keeps ofports up to date from a cache event.
func (c *Client) noteInterface(table string, m model.Model, deleted bool) {
	i, ok := m.(*vswitchd.Interface)
	if table != "Interface" || !ok {
		return
	}
	var nos [2]int
	for k, n := range []*int{i.Ofport, i.OfportRequest} {
		if n != nil {
			nos[k] = *n
		}
	}
	c.ofportMu.Lock()
	defer c.ofportMu.Unlock()
	if deleted {
		delete(c.ofports, i.UUID)
	} else {
		c.ofports[i.UUID] = nos
	}
}

// MaxOFPort is the highest number OpenFlow lets a physical port have
// (OFPP_MAX is 0xff00).
const MaxOFPort = 0xfeff

func (c *Client) interfaceChanged() <-chan struct{} {
	c.ifaceMu.Lock()
	defer c.ifaceMu.Unlock()
	return c.ifaceChanged
}

func (c *Client) notifyInterface(table string) {
	if table != "Interface" {
		return
	}
	c.ifaceMu.Lock()
	close(c.ifaceChanged)
	c.ifaceChanged = make(chan struct{})
	c.ifaceMu.Unlock()
}

// Dial connects to endpoint (e.g. "unix:/var/run/openvswitch/db.sock") and
// monitors the tables the host reads.
func Dial(ctx context.Context, endpoint, bridge string, log *slog.Logger) (*Client, error) {
	dbm, err := vswitchd.FullDatabaseModel()
	if err != nil {
		return nil, err
	}
	// libovsdb logs through logr; route it into our slog. Its chatty cache
	// tracing is at V(5) and above, below slog's debug level.
	lr := logr.FromSlogHandler(log.Handler())
	c, err := client.NewOVSDBClient(dbm, client.WithEndpoint(endpoint), client.WithLogger(&lr))
	if err != nil {
		return nil, fmt.Errorf("ovsdb client for %s: %w", endpoint, err)
	}
	if err := c.Connect(ctx); err != nil {
		return nil, fmt.Errorf("connect to ovsdb-server at %s: %w (is ovsdb-server running and the socket path right?)", endpoint, err)
	}
	if _, err := c.MonitorAll(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("monitor ovsdb at %s: %w", endpoint, err)
	}
	cl := &Client{c: c, bridge: bridge, log: log, ifaceChanged: make(chan struct{}), ofports: map[string][2]int{}}
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc: func(table string, m model.Model) {
			cl.noteInterface(table, m, false)
			cl.notifyInterface(table)
		},
		UpdateFunc: func(table string, _, m model.Model) {
			cl.noteInterface(table, m, false)
			cl.notifyInterface(table)
		},
		DeleteFunc: func(table string, m model.Model) { cl.noteInterface(table, m, true) },
	})
	// The rows the monitor brought before the handler was there. One the
	// events already removed may come back from this list: a number kept
	// in use too long is only skipped, never given twice.
	var is []vswitchd.Interface
	if err := c.List(ctx, &is); err != nil {
		c.Close()
		return nil, fmt.Errorf("list ovsdb interfaces at %s: %w", endpoint, err)
	}
	for i := range is {
		cl.noteInterface("Interface", &is[i], false)
	}
	return cl, nil
}

// Close disconnects.
func (c *Client) Close() { c.c.Close() }

func (c *Client) root(ctx context.Context) (*vswitchd.OpenvSwitch, error) {
	var rows []vswitchd.OpenvSwitch
	if err := c.c.List(ctx, &rows); err != nil {
		return nil, err
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("ovsdb: want exactly one Open_vSwitch row, found %d (run ovs-vsctl init?)", len(rows))
	}
	return &rows[0], nil
}

func (c *Client) transact(ctx context.Context, what string, ops ...ovsdb.Operation) error {
	res, err := c.c.Transact(ctx, ops...)
	if err != nil {
		return fmt.Errorf("ovsdb %s: %w", what, err)
	}
	if _, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		return fmt.Errorf("ovsdb %s: %w", what, err)
	}
	return nil
}

func (c *Client) getBridge(ctx context.Context) (*vswitchd.Bridge, error) {
	b := &vswitchd.Bridge{Name: c.bridge}
	if err := c.c.Get(ctx, b); err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return b, nil
}

// addBridge creates nb and the rows it refers to (its ports and their
// interfaces) and adds it to the switch, in one transaction.
func (c *Client) addBridge(ctx context.Context, root *vswitchd.OpenvSwitch, nb *vswitchd.Bridge, rows ...model.Model) error {
	ops, err := c.c.Create(append(rows, nb)...)
	if err != nil {
		return err
	}
	mut, err := c.c.Where(root).Mutate(root, model.Mutation{Field: &root.Bridges, Mutator: ovsdb.MutateOperationInsert, Value: []string{nb.UUID}})
	if err != nil {
		return err
	}
	return c.transact(ctx, "create bridge "+nb.Name, append(ops, mut...)...)
}

// EnsureBridge creates the bridge if missing and fixes its datapath type,
// fail mode and protocols if they drifted.
func (c *Client) EnsureBridge(ctx context.Context, datapathType string) error {
	secure := vswitchd.BridgeFailModeSecure
	protocols := []string{vswitchd.BridgeProtocolsOpenflow15}
	br, err := c.getBridge(ctx)
	if err != nil {
		return err
	}
	if br == nil {
		root, err := c.root(ctx)
		if err != nil {
			return err
		}
		iface := &vswitchd.Interface{UUID: "iface", Name: c.bridge, Type: "internal"}
		port := &vswitchd.Port{UUID: "port", Name: c.bridge, Interfaces: []string{iface.UUID}}
		nb := &vswitchd.Bridge{UUID: "bridge", Name: c.bridge, Ports: []string{port.UUID}, DatapathType: datapathType,
			FailMode: &secure, Protocols: protocols, ExternalIDs: map[string]string{OwnerKey: HostOwner}}
		if err := c.addBridge(ctx, root, nb, iface, port); err != nil {
			return err
		}
		c.log.Info("created bridge", "bridge", c.bridge, "datapath_type", datapathType)
		return nil
	}
	if br.DatapathType == datapathType && br.FailMode != nil && *br.FailMode == secure && slices.Equal(br.Protocols, protocols) {
		return nil
	}
	br.DatapathType, br.FailMode, br.Protocols = datapathType, &secure, protocols
	ops, err := c.c.Where(br).Update(br, &br.DatapathType, &br.FailMode, &br.Protocols)
	if err != nil {
		return err
	}
	c.log.Info("fixed bridge settings", "bridge", c.bridge, "datapath_type", datapathType)
	return c.transact(ctx, "update bridge "+c.bridge, ops...)
}

const flowRestoreWait = "flow-restore-wait"

// FlowRestoreWait reports other_config:flow-restore-wait.
func (c *Client) FlowRestoreWait(ctx context.Context) (bool, error) {
	root, err := c.root(ctx)
	if err != nil {
		return false, err
	}
	return root.OtherConfig[flowRestoreWait] == "true", nil
}

// SetFlowRestoreWait sets or clears other_config:flow-restore-wait. An
// operator (or upgrade script) sets it before restarting ovs-vswitchd so the
// datapath keeps forwarding with the old flows until the host has installed
// its flows again; the host clears it once it has.
func (c *Client) SetFlowRestoreWait(ctx context.Context, on bool) error {
	v := ""
	if on {
		v = "true"
	}
	return c.setOtherConfig(ctx, flowRestoreWait, v)
}

const userspaceTSO = "userspace-tso-enable"

// EnableUserspaceTSO sets other_config:userspace-tso-enable=true. With it,
// ovs-vswitchd's userspace datapath takes TCP segments and packets whose
// checksum is still to be filled in from the interfaces it opens later, and
// hands them on as they are, as the kernel datapath does; without it every
// pod must compute checksums itself and send MTU-sized segments. Call it
// before the bridge's ports are created. ovs-vswitchd applies it once and
// keeps it until it restarts, so it is never turned off here.
func (c *Client) EnableUserspaceTSO(ctx context.Context) error {
	if err := c.setOtherConfig(ctx, userspaceTSO, "true"); err != nil {
		return err
	}
	c.log.Info("enabled userspace TSO", "other_config", userspaceTSO)
	return nil
}

// OVSVersion is ovs-vswitchd's version as it records it in OVSDB
// (Open_vSwitch.ovs_version, e.g. "3.1.0"); "" until it has.
func (c *Client) OVSVersion(ctx context.Context) (string, error) {
	root, err := c.root(ctx)
	if err != nil {
		return "", err
	}
	if root.OVSVersion == nil {
		return "", nil
	}
	return *root.OVSVersion, nil
}

// setOtherConfig sets (or, for "", removes) one key of the Open_vSwitch
// table's other_config; nothing is written when it already holds v.
func (c *Client) setOtherConfig(ctx context.Context, key, v string) error {
	root, err := c.root(ctx)
	if err != nil {
		return err
	}
	if cur, ok := root.OtherConfig[key]; ok == (v != "") && cur == v {
		return nil
	}
	oc := maps.Clone(root.OtherConfig)
	if oc == nil {
		oc = map[string]string{}
	}
	if v != "" {
		oc[key] = v
	} else {
		delete(oc, key)
	}
	root.OtherConfig = oc
	ops, err := c.c.Where(root).Update(root, &root.OtherConfig)
	if err != nil {
		return err
	}
	return c.transact(ctx, "set other_config:"+key, ops...)
}

// PortSpec describes a port to create.
type PortSpec struct {
	Name        string
	Type        string
	Options     map[string]string
	ExternalIDs map[string]string
	OFPort      uint32 // requested ofport, 0 = any
	Owner       string
	// Exported: every plugin may output to the port. Creating an existing
	// port of the same owner updates it.
	Exported bool
}

// PortInfo is a port as OVSDB reports it.
type PortInfo struct {
	Name   string
	Type   string
	OFPort int // 0: not assigned yet, -1: failed
	// OFPortRequest is the number the port was created with (0: none):
	// ovs-vswitchd gives it unless another port holds it.
	OFPortRequest int
	MAC           string
	Error         string
	Owner         string
	Exported      bool
	ExternalIDs   map[string]string
}

func (c *Client) iface(ctx context.Context, name string) (*vswitchd.Interface, error) {
	i := &vswitchd.Interface{Name: name}
	if err := c.c.Get(ctx, i); err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return nil, fmt.Errorf("%w: %q", ErrNoPort, name)
		}
		return nil, err
	}
	return i, nil
}

func info(i *vswitchd.Interface) PortInfo {
	p := PortInfo{Name: i.Name, Type: i.Type, Owner: i.ExternalIDs[OwnerKey], Exported: i.ExternalIDs[ExportedKey] == "true", ExternalIDs: i.ExternalIDs}
	if i.Ofport != nil {
		p.OFPort = *i.Ofport
	}
	if i.OfportRequest != nil {
		p.OFPortRequest = *i.OfportRequest
	}
	if i.MACInUse != nil {
		p.MAC = *i.MACInUse
	}
	if i.Error != nil {
		p.Error = *i.Error
	}
	return p
}

// Port returns a port's current state.
func (c *Client) Port(ctx context.Context, name string) (PortInfo, error) {
	i, err := c.iface(ctx, name)
	if err != nil {
		return PortInfo{}, err
	}
	return info(i), nil
}

// Ports lists the interfaces owned by owner ("" for all).
func (c *Client) Ports(ctx context.Context, owner string) ([]PortInfo, error) {
	var is []vswitchd.Interface
	err := c.c.WhereCache(func(i *vswitchd.Interface) bool { return owner == "" || i.ExternalIDs[OwnerKey] == owner }).List(ctx, &is)
	if err != nil {
		return nil, err
	}
	out := make([]PortInfo, 0, len(is))
	for i := range is {
		out = append(out, info(&is[i]))
	}
	slices.SortFunc(out, func(a, b PortInfo) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

// PickOFPort returns an OpenFlow port number that no interface has or
// asked for. Numbers are handed out in a rising cycle from above the
// highest one in use, so a number freed by a deleted port is not given
// again soon after, while flows for the old port may still be going.
func (c *Client) PickOFPort(ctx context.Context) (uint32, error) {
	c.ofportMu.Lock()
	defer c.ofportMu.Unlock()
	used := make(map[int]bool, 2*len(c.ofports))
	highest := 0
	for _, nos := range c.ofports {
		for _, n := range nos {
			// Above MaxOFPort are the reserved ports: the bridge's own
			// interface is LOCAL (65534).
			if n > 0 && n <= MaxOFPort {
				used[n] = true
				highest = max(highest, n)
			}
		}
	}
	if c.nextOFPort == 0 {
		c.nextOFPort = highest%MaxOFPort + 1
	}
	for range MaxOFPort {
		n := c.nextOFPort
		c.nextOFPort = n%MaxOFPort + 1
		if !used[n] {
			return uint32(n), nil
		}
	}
	return 0, fmt.Errorf("bridge %q: every OpenFlow port number is in use", c.bridge)
}

// CreatePort adds a port (and its interface) to the bridge. Creating a port
// that exists with the same owner is a no-op; another owner's is refused.
func (c *Client) CreatePort(ctx context.Context, s PortSpec) error {
	_, err := c.EnsurePort(ctx, s)
	return err
}

// EnsurePort is CreatePort that also returns the OpenFlow number a new
// port was created with (0: the port existed). A new port without
// s.OFPort gets one from PickOFPort: every port the host creates names
// its number, so ovs-vswitchd never picks one on its own that a request
// in flight is about to ask for.
func (c *Client) EnsurePort(ctx context.Context, s PortSpec) (created uint32, err error) {
	if cur, err := c.iface(ctx, s.Name); err == nil {
		if o := cur.ExternalIDs[OwnerKey]; o != s.Owner {
			return 0, fmt.Errorf("port %q already exists and belongs to %q", s.Name, o)
		}
		if (cur.ExternalIDs[ExportedKey] == "true") == s.Exported {
			return 0, nil
		}
		// The owner changed its mind about exporting (an upgraded plugin).
		ext := maps.Clone(cur.ExternalIDs)
		if s.Exported {
			ext[ExportedKey] = "true"
		} else {
			delete(ext, ExportedKey)
		}
		cur.ExternalIDs = ext
		ops, err := c.c.Where(cur).Update(cur, &cur.ExternalIDs)
		if err != nil {
			return 0, err
		}
		return 0, c.transact(ctx, "update export of port "+s.Name, ops...)
	}
	// The bridge by name, not read from the cache: a Get copies the whole
	// row, every port's reference included. The mutation's row count says
	// whether it exists.
	br := &vswitchd.Bridge{Name: c.bridge}
	if s.OFPort == 0 {
		if s.OFPort, err = c.PickOFPort(ctx); err != nil {
			return 0, err
		}
	}
	ext := maps.Clone(s.ExternalIDs)
	if ext == nil {
		ext = map[string]string{}
	}
	ext[OwnerKey] = s.Owner
	if s.Exported {
		ext[ExportedKey] = "true"
	}
	iface := &vswitchd.Interface{UUID: "iface", Name: s.Name, Type: s.Type, Options: s.Options, ExternalIDs: ext}
	if s.OFPort != 0 {
		n := int(s.OFPort)
		iface.OfportRequest = &n
	}
	port := &vswitchd.Port{UUID: "port", Name: s.Name, Interfaces: []string{iface.UUID}, ExternalIDs: ext}
	ops, err := c.c.Create(iface, port)
	if err != nil {
		return 0, err
	}
	mut, err := c.c.Where(br).Mutate(br, model.Mutation{Field: &br.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{port.UUID}})
	if err != nil {
		return 0, err
	}
	ops = append(ops, mut...)
	res, err := c.c.Transact(ctx, ops...)
	if err == nil {
		var opErrs []ovsdb.OperationError
		if opErrs, err = ovsdb.CheckOperationResults(res, ops); err != nil {
			err = fmt.Errorf("%w: %v", err, opErrs)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("ovsdb create port %s: %w", s.Name, err)
	}
	if len(res) < len(ops) || res[len(ops)-1].Count != 1 {
		// Nothing refers to the new rows: OVSDB drops them again.
		return 0, fmt.Errorf("bridge %q does not exist", c.bridge)
	}
	return s.OFPort, nil
}

// LabelPort sets external_ids keys on a port and its interface, keeping
// the others; an empty value removes its key. One transaction, so both
// rows agree.
func (c *Client) LabelPort(ctx context.Context, name string, set map[string]string) error {
	iface, err := c.iface(ctx, name)
	if err != nil {
		return err
	}
	port := &vswitchd.Port{Name: name}
	if err := c.c.Get(ctx, port); err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return fmt.Errorf("%w: %q", ErrNoPort, name)
		}
		return err
	}
	ifIDs, portIDs := sdk.Relabel(iface.ExternalIDs, set), sdk.Relabel(port.ExternalIDs, set)
	if maps.Equal(ifIDs, iface.ExternalIDs) && maps.Equal(portIDs, port.ExternalIDs) {
		// Labelled so already: no transaction, so no round trip to
		// ovsdb-server (podnet re-labels its warm pods' ports at every
		// start).
		return nil
	}
	iface.ExternalIDs, port.ExternalIDs = ifIDs, portIDs
	ops, err := c.c.Where(iface).Update(iface, &iface.ExternalIDs)
	if err != nil {
		return err
	}
	pops, err := c.c.Where(port).Update(port, &port.ExternalIDs)
	if err != nil {
		return err
	}
	return c.transact(ctx, "label port "+name, append(ops, pops...)...)
}

// DeletePort removes a port from the bridge (OVSDB garbage-collects the Port
// and Interface rows). A missing port is not an error.
func (c *Client) DeletePort(ctx context.Context, name string) error {
	p := &vswitchd.Port{Name: name}
	if err := c.c.Get(ctx, p); err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return nil
		}
		return err
	}
	br, err := c.getBridge(ctx)
	if err != nil || br == nil {
		return err
	}
	mut, err := c.c.Where(br).Mutate(br, model.Mutation{Field: &br.Ports, Mutator: ovsdb.MutateOperationDelete, Value: []string{p.UUID}})
	if err != nil {
		return err
	}
	return c.transact(ctx, "delete port "+name, mut...)
}

// WaitOFPort waits until ovs-vswitchd assigned the port an OpenFlow port
// number, and returns it. A port vswitchd could not open fails with the
// interface's error text.
func (c *Client) WaitOFPort(ctx context.Context, name string) (uint32, error) {
	// The ticker is only a safety net (e.g. a reconnect that replaced the
	// cache); the cache event normally wakes the loop first.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		// Take the channel before reading, so a change landing between the
		// read and the select still wakes us.
		changed := c.interfaceChanged()
		p, err := c.Port(ctx, name)
		if err != nil && !errors.Is(err, ErrNoPort) {
			return 0, err
		}
		if err == nil {
			switch {
			case p.OFPort > 0:
				return uint32(p.OFPort), nil
			case p.OFPort < 0:
				return 0, fmt.Errorf("port %q: ovs-vswitchd could not add it: %s", name, p.Error)
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("waiting for the ofport of %q: %w", name, ctx.Err())
		case <-changed:
		case <-tick.C:
		}
	}
}
