// Command tunnel is the Switchyard overlay plugin: a flow-based Geneve (or
// VXLAN) port on br-int, routes to every other node's pod CIDRs through
// it, the node's routes to remote pods, and masquerade for pod traffic
// leaving the cluster. It is started by switchyard-agent; see package
// feature and doc.go.
package main

import (
	"switchyard.dev/switchyard/plugins/tunnel/feature"
	"switchyard.dev/switchyard/sdk"
)

func main() { sdk.Serve(feature.New()) }
