// Command podnet is the Switchyard pod networking plugin: IPAM from the
// node's pod CIDRs, the pod veth, its OVS port and the per-pod flows. It is
// started by switchyard-agent; see package feature.
package main

import (
	"switchyard.dev/switchyard/plugins/podnet/feature"
	"switchyard.dev/switchyard/sdk"
)

func main() { sdk.Serve(feature.New()) }
