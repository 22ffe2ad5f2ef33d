// Command switchyard-cni is the CNI plugin binary kubelet's runtime runs for
// every pod sandbox. It forwards each call to the switchyard agent on the
// node over a unix socket; see package thin.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"switchyard.dev/switchyard/cni/netconf"
	"switchyard.dev/switchyard/cni/thin"
)

func main() {
	skel.PluginMainFuncs(thin.New(os.Stdout).Funcs(),
		version.PluginSupports(netconf.SupportedVersions...),
		"switchyard-cni: forwards CNI calls to the switchyard agent")
}
