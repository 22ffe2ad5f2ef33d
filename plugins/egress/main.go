// Command egress is the Switchyard Egress plugin: selected pods leave the
// cluster from a fixed IP held by one live node, with failover. It is
// started by switchyard-agent; see doc.go and package feature.
package main

import (
	"switchyard.dev/switchyard/plugins/egress/feature"
	"switchyard.dev/switchyard/sdk"
)

func main() { sdk.Serve(feature.New()) }
