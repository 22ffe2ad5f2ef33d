// Command service is the Switchyard Service proxy plugin: it load-balances
// Kubernetes ClusterIP Services in br-int with OVS select groups and
// conntrack NAT, in place of kube-proxy. It is started by
// switchyard-agent; see package feature and doc.go.
package main

import (
	"switchyard.dev/switchyard/plugins/service/feature"
	"switchyard.dev/switchyard/sdk"
)

func main() { sdk.Serve(feature.New()) }
