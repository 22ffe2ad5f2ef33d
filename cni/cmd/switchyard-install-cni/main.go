// Command switchyard-install-cni is the agent DaemonSet's install step: it
// copies the switchyard-cni binary into the node's CNI bin directory (and
// the chained reference plugins where the node lacks them) and then writes
// the conflist, atomically and in that order, so the runtime never reads a
// network whose plugin is missing. See package conflist.
//
// With --uninstall it does the reverse: the conflist first, then the
// binaries it installed, leaving reference plugins that were there before
// it alone.
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
	chained := flag.String("chained-dir", "", "directory holding portmap and bandwidth, copied to the bin directory where it lacks them (empty: they must be there)")
	uninstall := flag.Bool("uninstall", false, "remove the conflist and the binaries Switchyard installed, then exit")
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
	if *uninstall {
		removed, err := conflist.Uninstall(o)
		for _, p := range removed {
			fmt.Println("removed", p)
		}
		if err != nil {
			fail(err)
		}
		return
	}
	if *chained != "" {
		copied, err := conflist.InstallChained(*chained, o)
		if err != nil {
			fail(err)
		}
		for _, b := range copied {
			fmt.Println("installed", b)
		}
	}
	path, err := conflist.Install(*src, o)
	if err != nil {
		fail(err)
	}
	fmt.Println("wrote", path)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "switchyard-install-cni:", err)
	os.Exit(1)
}
