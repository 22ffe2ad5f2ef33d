package cniserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"switchyard.dev/switchyard/host/ifstore"
	"switchyard.dev/switchyard/sdk"
)

// SocketName is the CNI socket's name inside the agent's socket dir.
const SocketName = "cni.sock"

// NodeOptions are what the agent supplies to run the CNI path.
type NodeOptions struct {
	// SocketDir holds SocketName; StateDir holds the interface store.
	SocketDir, StateDir string
	// Handler finds the CNI-capable plugin (Agent.CNIPlugin).
	Handler Resolver
	// WaitReady, if set, gates each ADD (see Options.WaitReady).
	WaitReady func(ctx context.Context) error
	// Ports, if set, is used to reconcile the store at start.
	Ports ifstore.PortView
	// Publish, if set, receives every pod interface change (first a replay
	// of all current interfaces), e.g. to forward to the plugins that
	// subscribe to pod interface events.
	Publish func(context.Context, sdk.PodInterfaceEventRequest)
	Logger  *slog.Logger
	// Observe, if set, times every request (see Options.Observe).
	Observe func(verb string, took time.Duration, failed bool)
	// Begin, if set, brackets every ADD, DEL and CHECK (see Options.Begin).
	Begin func() (end func())
}

// Node is the running CNI path of an agent: interface store and server.
type Node struct {
	Server *Server
	Store  *ifstore.Store
	Socket string
	unsub  func()
	// lateUnsub ends the Subscribe feed; Subscribe runs before Stop.
	lateUnsub func()
	done      chan error
}

// StartNode opens and reconciles the interface store, starts publishing
// its events, and serves CNI. It returns once the socket accepts calls, so
// the caller may then write the conflist.
func StartNode(ctx context.Context, o NodeOptions) (*Node, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	store, err := ifstore.Open(filepath.Join(o.StateDir, "interfaces.json"), o.Logger)
	if err != nil {
		return nil, err
	}
	if o.Ports != nil {
		rep, err := store.Reconcile(ctx, o.Ports)
		if err != nil {
			return nil, fmt.Errorf("reconciling the interface store with OVS: %w", err)
		}
		if len(rep.Stale)+len(rep.Renumbered) > 0 {
			o.Logger.Warn("interface store reconciled", "stale", len(rep.Stale), "renumbered", len(rep.Renumbered))
		}
	}
	n := &Node{Store: store, Socket: filepath.Join(o.SocketDir, SocketName), done: make(chan error, 1)}
	if o.Publish != nil {
		n.unsub = store.Subscribe(func(ctx context.Context, e ifstore.Event) { o.Publish(ctx, PodInterfaceEvent(e)) })
	}
	n.Server, err = New(Options{Socket: n.Socket, Handler: o.Handler, WaitReady: o.WaitReady, Store: store, Logger: o.Logger, Observe: o.Observe, Begin: o.Begin})
	if err == nil {
		err = n.Server.Listen()
	}
	if err != nil {
		if n.unsub != nil {
			n.unsub()
		}
		return nil, err
	}
	go func() { n.done <- n.Server.Serve() }()
	return n, nil
}

// Stop stops serving (in-flight calls get grace) and ends the event feed.
func (n *Node) Stop(grace time.Duration) {
	n.Server.Stop(grace)
	<-n.done
	if n.unsub != nil {
		n.unsub()
	}
	if n.lateUnsub != nil {
		n.lateUnsub()
	}
}

// Subscribe starts publishing to fn, first a replay of every current
// interface: for an agent that serves CNI (so early ADDs can wait for it)
// before the plugins that subscribe are running. Call it at most once.
func (n *Node) Subscribe(fn func(context.Context, sdk.PodInterfaceEventRequest)) {
	n.lateUnsub = n.Store.Subscribe(func(ctx context.Context, e ifstore.Event) { fn(ctx, PodInterfaceEvent(e)) })
}

// Attachments lists every recorded interface, for the CNI plugin's Start
// (sdk.StartRequest.Attachments).
func (n *Node) Attachments() []sdk.PodInterface {
	recs := n.Store.List()
	out := make([]sdk.PodInterface, len(recs))
	for i, r := range recs {
		out[i] = podInterface(r)
	}
	return out
}

// PodInterfaceEvent converts a store event to the SDK's event.
func PodInterfaceEvent(e ifstore.Event) sdk.PodInterfaceEventRequest {
	kind := sdk.PodInterfaceAdded
	if e.Kind == ifstore.Deleted {
		kind = sdk.PodInterfaceDeleted
	}
	return sdk.PodInterfaceEventRequest{Kind: kind, Interface: podInterface(e.Interface)}
}

// podInterface is a record as the SDK shows it.
func podInterface(i ifstore.Interface) sdk.PodInterface {
	mac, _ := net.ParseMAC(i.MAC)
	return sdk.PodInterface{
		PodNamespace: i.PodNamespace, PodName: i.PodName, ContainerID: i.ContainerID,
		IfName: i.IfName, HostIfName: i.HostIfName, OFPort: i.OFPort, MAC: mac, IPs: i.IPs,
	}
}
