package main

import (
	"switchyard.dev/switchyard/plugins/netpol/feature"
	"switchyard.dev/switchyard/sdk"
)

func main() { sdk.Serve(feature.New()) }
