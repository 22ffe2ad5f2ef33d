package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NodeAgent is one node's switchyard-agent as the agent itself reports it:
// its plugins and their health, the node facts it works with, readiness
// and a heartbeat. The agent creates and keeps its own (named after the
// node); it writes only when something changed, and otherwise renews the
// heartbeat about once a minute.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=na
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Plugins",type=integer,JSONPath=`.status.pluginCount`
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.heartbeat`
type NodeAgent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status NodeAgentStatus `json:"status,omitempty"`
}

// NodeAgentStatus is what the agent reports.
type NodeAgentStatus struct {
	// AgentVersion is the SDK API version the agent hosts plugins at.
	// +optional
	AgentVersion string `json:"agentVersion,omitempty"`
	// DatapathType is the bridge's datapath (system or netdev).
	// +optional
	DatapathType string `json:"datapathType,omitempty"`
	// Node holds the node facts the agent works with.
	// +optional
	Node NodeAgentFacts `json:"node,omitempty"`
	// PluginCount is len(plugins), for the printer column.
	PluginCount int32 `json:"pluginCount"`
	// Plugins in config order.
	// +optional
	Plugins []NodeAgentPlugin `json:"plugins,omitempty"`
	// Conditions: Ready (OVS connected, node facts known, every plugin
	// synced), with the reason when it is not.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Heartbeat is when the agent last wrote this status.
	// +optional
	Heartbeat metav1.Time `json:"heartbeat,omitempty"`
}

// NodeAgentFacts are the node facts of a NodeAgent.
type NodeAgentFacts struct {
	// +optional
	PodCIDRs []string `json:"podCIDRs,omitempty"`
	// +optional
	NodeIPs []string `json:"nodeIPs,omitempty"`
	// +optional
	GatewayIP string `json:"gatewayIP,omitempty"`
	// +optional
	MTU int32 `json:"mtu,omitempty"`
	// +optional
	PodMTU int32 `json:"podMTU,omitempty"`
	// +optional
	Uplink string `json:"uplink,omitempty"`
}

// NodeAgentPlugin is one plugin of a NodeAgent.
type NodeAgentPlugin struct {
	Name string `json:"name"`
	// +optional
	Version string `json:"version,omitempty"`
	// State is starting, running, synced, restarting, failed, stopped or
	// unloading.
	State string `json:"state"`
	// Restarts since the agent started.
	Restarts int32 `json:"restarts"`
	Flows    int32 `json:"flows"`
	// Tables the plugin owns.
	// +optional
	Tables []string `json:"tables,omitempty"`
	// +optional
	LastError string `json:"lastError,omitempty"`
}

// NodeAgentList is a list of NodeAgents.
//
// +kubebuilder:object:root=true
type NodeAgentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeAgent `json:"items"`
}

// ControllerInfo is switchyard-controller as it reports itself: the nodes
// that watch it and how far behind each one is. The controller keeps one,
// named switchyard-controller, writing when the set of nodes changes and
// otherwise about twice a minute.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,path=controllerinfos
// +kubebuilder:printcolumn:name="Connected",type=integer,JSONPath=`.status.connectedNodes`
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.heartbeat`
type ControllerInfo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status ControllerInfoStatus `json:"status,omitempty"`
}

// ControllerInfoStatus is what the controller reports.
type ControllerInfoStatus struct {
	// ConnectedNodes is how many nodes have a Watch stream open.
	ConnectedNodes int32 `json:"connectedNodes"`
	// Nodes the controller holds an event log for, by name.
	// +optional
	Nodes []ControllerNode `json:"nodes,omitempty"`
	// Heartbeat is when the controller last wrote this status.
	// +optional
	Heartbeat metav1.Time `json:"heartbeat,omitempty"`
}

// ControllerNode is one node's stream.
type ControllerNode struct {
	Name string `json:"name"`
	// Streams open (0: disconnected, its log kept for a resume).
	Streams int32 `json:"streams"`
	// Lag is how many computed events no stream of the node has sent yet.
	Lag int64 `json:"lag"`
}

// ControllerInfoList is a list of ControllerInfos.
//
// +kubebuilder:object:root=true
type ControllerInfoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ControllerInfo `json:"items"`
}
