// Command switchyard-install-cni is the agent DaemonSet's install step: it
// copies the switchyard-cni binary into the node's CNI bin directory and
// then writes the conflist, atomically and in that order, so the runtime
// never reads a network whose plugin is missing. See package conflist.
package main

import (
	"flag"
	"fmt"
	"os"

	"switchyard.dev/switchyard/cni/conflist"
)

func main() {
	var o conflist.Options
	src := flag.String("binary", "", "path of the switchyard-cni binary to install (empty: already installed)")
	flag.StringVar(&o.BinDir, "bin-dir", conflist.DefaultBinDir, "CNI bin directory")
	flag.StringVar(&o.ConfDir, "conf-dir", conflist.DefaultConfDir, "CNI config directory")
	flag.StringVar(&o.FileName, "file", conflist.DefaultFileName, "conflist file name")
	flag.StringVar(&o.Network, "network", conflist.DefaultNetwork, "CNI network name")
	flag.StringVar(&o.CNIVersion, "cni-version", conflist.DefaultCNIVersion, "cniVersion of the conflist")
	flag.StringVar(&o.Socket, "socket", "", "agent CNI socket (empty: the binary's default)")
	flag.IntVar(&o.MTU, "mtu", 0, "pod MTU (0: the agent's)")
	flag.BoolVar(&o.PortMap, "portmap", true, "chain the portmap plugin (hostPort)")
	flag.BoolVar(&o.Bandwidth, "bandwidth", true, "chain the bandwidth plugin (traffic shaping annotations)")
	flag.Parse()
	path, err := conflist.Install(*src, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "switchyard-install-cni:", err)
		os.Exit(1)
	}
	fmt.Println("wrote", path)
}
