package sdk

import (
	"context"
	"net"
	"net/netip"

	"switchyard.dev/switchyard/sdk/flow"
)

// Feature is what every plugin implements.
type Feature interface {
	// Describe says who the plugin is and what it needs. It is called once,
	// before Start, and must not do I/O.
	Describe(ctx context.Context, req DescribeRequest, resp *DescribeResponse) error
	// Start hands the plugin its assignment and the Host handle. The plugin
	// installs its flows (in as few batches as it likes) and calls
	// Host.Synced once the switch holds everything it needs; only then does
	// the host remove the flows of the plugin's previous incarnation.
	// Start may launch goroutines that keep using the Host; Start itself
	// should return promptly.
	Start(ctx context.Context, req StartRequest, resp *StartResponse) error
}

// Stopper is implemented by features that need to release something when
// the host stops them (the process exits right after). Flows stay on the
// switch either way; StopRequest.Unload says whether the plugin is gone
// for good.
type Stopper interface {
	Stop(ctx context.Context, req StopRequest, resp *StopResponse) error
}

// CNIHandler is implemented by the feature that wires pods (podnet).
//
// The host owns the attachment's bookkeeping, so the plugin does none of
// it: the host refuses a second ADD of an attachment it holds, records the
// attachment once CNIAdd returned (StartRequest.Attachments gives the
// records back to the next incarnation), and after a failed CNIAdd it
// calls CNIDel for the same attachment, as a CNI runtime would. CNIAdd
// need not undo its partial work, and CNIDel must remove whatever part of
// an attachment exists, succeeding when nothing does.
type CNIHandler interface {
	CNIAdd(ctx context.Context, req CNIAddRequest, resp *CNIAddResponse) error
	CNIDel(ctx context.Context, req CNIDelRequest, resp *CNIDelResponse) error
	CNICheck(ctx context.Context, req CNICheckRequest, resp *CNICheckResponse) error
}

// CNIGarbageCollector is implemented by a CNI plugin that can remove the
// attachments a runtime no longer lists (CNI GC). The host detaches its
// own stale records first, then calls it with the runtime's valid list, so
// whatever the plugin holds beyond the host's records (an ADD cut short by
// an agent crash: a veth, a port, addresses, flows) goes too.
type CNIGarbageCollector interface {
	CNIGC(ctx context.Context, req CNIGCRequest, resp *CNIGCResponse) error
}

// PodInterfaceSubscriber receives pod interface additions and removals.
type PodInterfaceSubscriber interface {
	PodInterfaceEvent(ctx context.Context, req PodInterfaceEventRequest, resp *PodInterfaceEventResponse) error
}

// PacketInHandler receives packet-ins from the plugin's tables
// (flow.Controller actions and MissController tables).
type PacketInHandler interface {
	PacketIn(ctx context.Context, req PacketInRequest, resp *PacketInResponse) error
}

// NodeEventSubscriber receives changes of other nodes in the cluster.
type NodeEventSubscriber interface {
	NodeEvent(ctx context.Context, req NodeEventRequest, resp *NodeEventResponse) error
}

// NodeFactsSubscriber is told when the facts about this node change: a pod
// CIDR assigned late or replaced, a new node IP, a new pod MTU because a
// plugin declared an encapsulation overhead. Host.NodeFacts returns the new
// facts from then on.
type NodeFactsSubscriber interface {
	NodeFactsChanged(ctx context.Context, req NodeFactsChangedRequest, resp *NodeFactsChangedResponse) error
}

// DescribeRequest is empty today.
type DescribeRequest struct {
	// Config is the plugin's config section from the agent config (JSON),
	// the same bytes Start receives, so what a plugin declares may depend
	// on it.
	Config []byte
}

// DescribeResponse is the plugin's description.
type DescribeResponse struct {
	// Name identifies the plugin in logs, cookies and the CLI. It must match
	// the name under which the host's config enables it.
	Name string
	// Version is the plugin's own version string.
	Version string
	Tables  []Table
	// Fields are the register fields the plugin needs beyond the well-known ones.
	Fields []flow.Field
	// Resources are the shared switch resources the plugin needs (ct
	// zones, bits of ct_mark, ct_label, pkt_mark and metadata); the host
	// grants concrete values in Assignment.Grants. Using one that was not
	// granted is refused. (Ports are granted by creating them: see
	// PortRequest.Exported.)
	Resources []Resource
	// EncapOverhead is how many bytes the plugin's encapsulation adds to a
	// pod packet on the wire (e.g. 50 for Geneve over IPv4). The host
	// lowers NodeFacts.PodMTU by the largest overhead any plugin declares
	// and tells every plugin, so pod interfaces fit the uplink.
	EncapOverhead int
}

// StartRequest carries the assignment.
type StartRequest struct {
	Host       Host
	Assignment Assignment
	Node       NodeFacts
	// Config is the plugin's section of the host config, as JSON.
	Config []byte
	// Cluster is how to reach the apiserver and the controller, with a
	// token the host keeps fresh.
	Cluster Cluster
	// Attachments are the pod interfaces the host recorded from the CNI
	// ADDs it served through this plugin (CNIHandler plugins only). The
	// host's record is the only one: a CNI plugin need not keep its own.
	// It re-installs the datapath of these attachments, and removes what
	// it holds for any other (an ADD cut short by a crash: the host
	// records an attachment only once the plugin's ADD returned). No CNI
	// call reaches the plugin until Start returns, so the list does not
	// change under it.
	Attachments []PodInterface
}

// StartResponse is empty today.
type StartResponse struct{}

// StopRequest says why the plugin is stopped.
type StopRequest struct {
	// Unload: the operator disabled the plugin (it left the config), and
	// the host removes its flows, ports and tables next. The plugin should
	// remove what it made outside the switch (routes, nftables rules,
	// state files). False when the agent stops, restarts or restarts the
	// plugin: a next incarnation takes over, so leave everything in place
	// and traffic keeps flowing.
	Unload bool
}

// StopResponse is empty today.
type StopResponse struct{}

// CNIArgs are the CNI invocation parameters the host forwards.
type CNIArgs struct {
	ContainerID  string
	Netns        string
	IfName       string
	PodNamespace string
	PodName      string
	PodUID       string
	// NetConf is the network configuration JSON from the CNI config file.
	NetConf []byte
	// MTU is NetConf's "mtu", parsed and checked by the host (0 when the
	// config sets none), so a plugin need not parse NetConf for it.
	MTU int
}

// CNIAddRequest asks to wire a pod.
type CNIAddRequest struct{ Args CNIArgs }

// IPConfig is one address given to the pod.
type IPConfig struct {
	Address netip.Prefix
	Gateway netip.Addr
}

// Route is a route inside the pod.
type Route struct {
	Dst netip.Prefix
	GW  netip.Addr
}

// PodInterface is how a pod is attached to br-int.
type PodInterface struct {
	PodNamespace string
	PodName      string
	ContainerID  string
	IfName       string // inside the pod
	HostIfName   string // the host end (the OVS port name)
	OFPort       uint32
	MAC          net.HardwareAddr
	IPs          []netip.Addr
}

// CNIAddResponse is the CNI result.
type CNIAddResponse struct {
	IPs       []IPConfig
	Routes    []Route
	Interface PodInterface
	MTU       int
}

// CNIDelRequest asks to unwire a pod; it must succeed if the pod is gone.
type CNIDelRequest struct{ Args CNIArgs }

// CNIDelResponse is empty today.
type CNIDelResponse struct{}

// CNIAttachment names one attachment: a container's interface.
type CNIAttachment struct {
	ContainerID string
	IfName      string
}

// CNIGCRequest lists the attachments the runtime still has; everything
// else the plugin holds is to be removed.
type CNIGCRequest struct {
	Valid   []CNIAttachment
	NetConf []byte
}

// CNIGCResponse says how many attachments the plugin removed.
type CNIGCResponse struct{ Removed int }

// CNICheckRequest asks whether the pod is still wired as expected.
type CNICheckRequest struct{ Args CNIArgs }

// CNICheckResponse is empty today; an error means the check failed.
type CNICheckResponse struct{}

// PodInterfaceEventKind says what happened to a pod interface.
type PodInterfaceEventKind uint8

const (
	PodInterfaceAdded PodInterfaceEventKind = iota + 1
	PodInterfaceDeleted
)

// PodInterfaceEventRequest reports one pod interface change.
type PodInterfaceEventRequest struct {
	Kind      PodInterfaceEventKind
	Interface PodInterface
}

// PodInterfaceEventResponse is empty today.
type PodInterfaceEventResponse struct{}

// PacketInRequest is a packet the switch sent to the plugin.
type PacketInRequest struct {
	// Table is the name of the table that sent it; TableID its ID.
	Table   string
	TableID uint8
	// Tag is the low 32 bits of the cookie of the flow that sent it.
	Tag      uint32
	InPort   uint32
	Userdata []byte
	// Data is the packet, starting with the Ethernet header.
	Data []byte
	// Fields holds, by name, the value the packet carried in each of the
	// plugin's register fields and each well-known field (flow.Field*).
	Fields map[string]uint32
	// CT is the packet's conntrack state at the controller action.
	CT CTInfo
}

// Field returns the value the packet carried in f (0 if unknown).
func (r PacketInRequest) Field(f flow.Field) uint32 { return r.Fields[f.Name] }

// PacketInResponse is empty today.
type PacketInResponse struct{}

// NodeEventKind says what happened to a remote node.
type NodeEventKind uint8

const (
	NodeAdded NodeEventKind = iota + 1
	NodeUpdated
	NodeDeleted
)

// NodeInfo describes another node of the cluster.
type NodeInfo struct {
	Name     string
	NodeIPs  []netip.Addr
	PodCIDRs []netip.Prefix
}

// NodeEventRequest reports one node change.
type NodeEventRequest struct {
	Kind NodeEventKind
	Node NodeInfo
}

// NodeEventResponse is empty today.
type NodeEventResponse struct{}

// NodeFactsChangedRequest carries the facts before and after a change.
type NodeFactsChangedRequest struct {
	Old, New NodeFacts
}

// NodeFactsChangedResponse is empty today.
type NodeFactsChangedResponse struct{}
