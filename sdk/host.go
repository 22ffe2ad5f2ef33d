package sdk

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"

	"switchyard.dev/switchyard/sdk/flow"
)

// Host is the plugin's handle on the agent host. It is safe for concurrent use.
type Host interface {
	// Apply submits a batch of flow, group and meter operations. The batch is
	// applied atomically: on error nothing of it reached the switch.
	Apply(ctx context.Context, b *flow.Batch) error
	// CreatePort creates an OVS port on the bridge (idempotent by name) and
	// waits until ovs-vswitchd has attached it, unless req.NoWait.
	CreatePort(ctx context.Context, req PortRequest) (Port, error)
	// WaitPort waits until ovs-vswitchd has attached a port and returns
	// it. It fails when the switch could not open the port, or gave it
	// another OpenFlow port number than the one it was created with.
	WaitPort(ctx context.Context, name string) (Port, error)
	// DeletePort deletes a port this plugin created. Deleting a missing port
	// is not an error.
	DeletePort(ctx context.Context, name string) error
	// Port looks up a port (any owner) by name.
	Port(ctx context.Context, name string) (Port, error)
	// PacketOut injects a packet into the switch.
	PacketOut(ctx context.Context, p PacketOut) error
	// NodeFacts returns the current facts about this node.
	NodeFacts(ctx context.Context) (NodeFacts, error)
	// Synced says the switch now holds every flow this incarnation needs; the
	// host then deletes the flows of the plugin's previous incarnations.
	Synced(ctx context.Context) error
	// Logger logs into the host's log, tagged with the plugin's name.
	Logger() *slog.Logger
	// Reader reads the plugin's flows, groups and meters back from the switch.
	Reader
}

// PortRequest asks for an OVS port.
type PortRequest struct {
	Name string
	// Type is the OVS interface type: "" (system, e.g. a veth end),
	// "internal", "geneve", "patch", ...
	Type string
	// Options are the interface options (e.g. remote_ip=flow for geneve).
	Options map[string]string
	// ExternalIDs are stored on the port and interface for operators.
	ExternalIDs map[string]string
	// OFPort requests a specific OpenFlow port number (0: the host picks
	// a free one).
	OFPort uint32
	// Exported lets every plugin output to the port (flow.Output); by
	// default only its creator may. A tunnel port that other features send
	// into is exported; a pod's port is its plugin's own.
	Exported bool
	// NoWait returns once the port is in the switch's database, before
	// ovs-vswitchd has attached it, with the OpenFlow port number it was
	// created with (OFPort, or the one the host picked). Attaching takes
	// the switch about 10 ms; a caller can install the port's flows
	// meanwhile, and calls WaitPort before it relies on the port (podnet
	// answers a CNI ADD only after WaitPort). A port that already exists is
	// returned as it is; an OFPort another port holds is refused
	// (ErrConflict).
	NoWait bool
}

// ExternalIDNodeVeth, set to "true" in PortRequest.ExternalIDs, says the
// port's device is one end of a veth pair whose other end stays in the
// node's netns (podnet's warm ports). Nothing deletes such a pair with a
// pod's sandbox, so uninstall deletes it with the bridge.
const ExternalIDNodeVeth = "switchyard.dev/node-veth"

// Port is an OVS port on the bridge.
type Port struct {
	Name string
	// OFPort is the OpenFlow number ovs-vswitchd gave the port (0 until
	// it attached the port, or when it could not); from CreatePort with
	// NoWait, the number the port was created with.
	OFPort uint32
	// OFPortRequest is the number the port was created with (0: none).
	// Flows installed before the attach (PortRequest.NoWait) name it, and
	// the switch may have given another (see WaitPort), so whoever
	// removes a port's flows looks for both.
	OFPortRequest uint32
	MAC           net.HardwareAddr
	Owner         string // the plugin that created it ("" if not created through the host)
	// Exported: every plugin may output to it (PortRequest.Exported).
	Exported bool
}

// PacketOut is a packet to inject.
type PacketOut struct {
	// InPort is the port the packet pretends to come from (0: controller).
	InPort uint32
	// Actions run on the packet, e.g. flow.Output(5).
	Actions []flow.Action
	// Resubmit runs the packet through the pipeline from table 0 after
	// Actions (OpenFlow's OFPP_TABLE).
	Resubmit bool
	// ResumeTable, if set, continues the packet in this table after
	// Actions instead: a table the plugin owns or may write (an exported
	// one). It excludes Resubmit.
	ResumeTable string
	Data        []byte
}

// NodeFacts is what the host knows about its node. The host learns them
// from the node's Node object (spec.podCIDRs, status.addresses) and the
// uplink interface; its config may override each one.
type NodeFacts struct {
	Name string
	// PodCIDRs are the node's pod ranges (spec.podCIDRs), one per family.
	PodCIDRs []netip.Prefix
	// NodeIPs are the node's InternalIP addresses.
	NodeIPs []netip.Addr
	// ExternalIPs are the node's ExternalIP addresses, if any.
	ExternalIPs []netip.Addr
	GatewayIP   netip.Addr
	GatewayMAC  net.HardwareAddr
	// MTU is the uplink's MTU: the interface that holds the first node IP.
	MTU int
	// PodMTU is the MTU pod interfaces get: MTU less the largest
	// encapsulation overhead a plugin declared.
	PodMTU int
	// Uplink is the name of the interface holding the first node IP ("" if
	// the host could not find it).
	Uplink       string
	Bridge       string
	DatapathType string
	// UserspaceTSO: the datapath is netdev and ovs-vswitchd takes packets
	// with pending segmentation and checksums (userspace-tso-enable), so a
	// pod interface may keep its transmit offloads on. Always false on the
	// kernel datapath, which handles offloads without being asked.
	UserspaceTSO bool
}

// Errors the host returns; test them with errors.Is. The error text names
// the plugin, table, field or flow involved.
var (
	// ErrConflict: another plugin already holds a flow with the same key.
	ErrConflict = errors.New("flow conflict")
	// ErrNotOwner: the table (or port, group) belongs to another plugin and is not exported.
	ErrNotOwner = errors.New("not owner")
	// ErrUnknownTable: no table of that name is declared.
	ErrUnknownTable = errors.New("unknown table")
	// ErrUnallocatedField: the register field was not requested in Describe.
	ErrUnallocatedField = errors.New("unallocated register field")
	// ErrBackwardJump: the jump would go to an earlier table.
	ErrBackwardJump = errors.New("backward jump")
	// ErrLimit: a per-plugin limit (flows, batch size, request rate) was hit.
	ErrLimit = errors.New("plugin limit exceeded")
	// ErrInvalid: the request is malformed.
	ErrInvalid = errors.New("invalid request")
	// ErrSwitch: the switch refused or the host could not reach it.
	ErrSwitch = errors.New("switch error")
	// ErrNotFound: no such port, group or meter.
	ErrNotFound = errors.New("not found")
)

// Sentinels lists the host errors by wire reason; the SDK uses it to restore
// errors.Is across the process boundary.
func Sentinels() map[string]error {
	return map[string]error{
		"CONFLICT":          ErrConflict,
		"NOT_OWNER":         ErrNotOwner,
		"UNKNOWN_TABLE":     ErrUnknownTable,
		"UNALLOCATED_FIELD": ErrUnallocatedField,
		"BACKWARD_JUMP":     ErrBackwardJump,
		"LIMIT":             ErrLimit,
		"INVALID":           ErrInvalid,
		"SWITCH":            ErrSwitch,
		"NOT_FOUND":         ErrNotFound,
	}
}
