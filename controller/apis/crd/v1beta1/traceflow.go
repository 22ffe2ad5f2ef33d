package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Traceflow asks the cluster where a packet from a pod goes: the agent of
// the source pod's node traces it through br-int (every table, the plugin
// owning it, the flow that matched) and confirms the path with a real,
// marked packet that reaches no application; each node the packet tunnels
// to continues the trace there. The result, node by node, lands in the
// status. Delete the object when done; it holds no resources.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tf
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Outcome",type=string,JSONPath=`.status.outcome`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.source`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Traceflow struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TraceflowSpec `json:"spec"`
	// +optional
	Status TraceflowStatus `json:"status,omitempty"`
}

// TraceflowSpec is the packet to trace. Exactly one destination is set.
//
// +kubebuilder:validation:XValidation:rule="(has(self.destinationIP) ? 1 : 0) + (has(self.destinationPod) ? 1 : 0) + (has(self.destinationService) ? 1 : 0) == 1",message="set exactly one of destinationIP, destinationPod, destinationService"
type TraceflowSpec struct {
	// Source is the sending pod, namespace/name.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$`
	Source string `json:"source"`
	// DestinationIP is any IPv4 address.
	// +optional
	DestinationIP string `json:"destinationIP,omitempty"`
	// DestinationPod is a pod, namespace/name, on any node.
	// +optional
	DestinationPod string `json:"destinationPod,omitempty"`
	// DestinationService is a Service, namespace/name: the packet goes to
	// its cluster IP and Port, and the trace shows the endpoint chosen.
	// +optional
	DestinationService string `json:"destinationService,omitempty"`
	// +kubebuilder:validation:Enum=tcp;udp;sctp;icmp
	// +kubebuilder:default=tcp
	// +optional
	Protocol string `json:"protocol,omitempty"`
	// Port is the destination port (tcp, udp, sctp).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
	// TimeoutSeconds bounds the whole trace; a node that has not answered
	// by then fails it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	// +kubebuilder:default=20
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// Traceflow phases.
const (
	TraceflowRunning   = "Running"
	TraceflowSucceeded = "Succeeded"
	TraceflowFailed    = "Failed"
)

// TraceflowStatus is the trace so far.
type TraceflowStatus struct {
	// Phase is Running, Succeeded (the trace reached the packet's end) or
	// Failed (Reason says why).
	// +optional
	Phase string `json:"phase,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// Outcome is the last node's verdict: delivered, dropped, tunnel,
	// host, output or controller.
	// +optional
	Outcome string `json:"outcome,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// Nodes in the order the packet crossed them.
	// +optional
	Nodes []TraceflowNode `json:"nodes,omitempty"`
	// Next is the hand-off to the node the packet tunnelled to: that
	// node's agent continues the trace with Request (an agent-internal
	// JSON trace request).
	// +optional
	Next *TraceflowHandoff `json:"next,omitempty"`
}

// TraceflowHandoff passes a trace to the next node.
type TraceflowHandoff struct {
	Node    string `json:"node"`
	Request string `json:"request"`
}

// TraceflowNode is the trace on one node.
type TraceflowNode struct {
	Node string `json:"node"`
	// +optional
	Hops []TraceflowHop `json:"hops,omitempty"`
	// +optional
	Verdicts []TraceflowVerdict `json:"verdicts,omitempty"`
	// DatapathConfirmed: the marked packet took the traced path.
	// +optional
	DatapathConfirmed bool `json:"datapathConfirmed,omitempty"`
	// Micros is how long this node's trace took.
	// +optional
	Micros int64 `json:"micros,omitempty"`
}

// TraceflowHop is one flow the packet matched.
type TraceflowHop struct {
	Table string `json:"table"`
	// +optional
	TableOwner string `json:"tableOwner,omitempty"`
	// Plugin wrote the flow that matched.
	// +optional
	Plugin   string `json:"plugin,omitempty"`
	Priority int32  `json:"priority"`
	// +optional
	Flow string `json:"flow,omitempty"`
	// Description is the plugin's account of the flow (policy and rule).
	// +optional
	Description string `json:"description,omitempty"`
	// +optional
	Notes []string `json:"notes,omitempty"`
	// End is drop or miss where a path ended.
	// +optional
	End string `json:"end,omitempty"`
}

// TraceflowVerdict is where the packet (or one copy) went on a node.
type TraceflowVerdict struct {
	Kind string `json:"kind"`
	// +optional
	Pod string `json:"pod,omitempty"`
	// +optional
	Node string `json:"node,omitempty"`
	// +optional
	Plugin string `json:"plugin,omitempty"`
	// +optional
	Table string `json:"table,omitempty"`
	// +optional
	Description string `json:"description,omitempty"`
}

// TraceflowList is a list of Traceflows.
//
// +kubebuilder:object:root=true
type TraceflowList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Traceflow `json:"items"`
}
