package cni

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"switchyard.dev/switchyard/cni/conflist"
	"switchyard.dev/switchyard/itest/cluster"
	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/upstream"
)

// TestChainedBandwidth chains the reference bandwidth plugin after
// switchyard, as the conflist installer does: bandwidth must find the
// host-side interface in switchyard's result and shape it, and DEL through
// the chain must still clean up. (portmap needs iptables or nftables,
// which this machine lacks, so it is covered by the conflist unit tests.)
func TestChainedBandwidth(t *testing.T) {
	_, n := node1(t, cluster.Options{})
	ref, err := upstream.EnsureCNIPlugins(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(ref, "bandwidth"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.CNIBinDir, "bandwidth"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	a := agentOf(t, n)
	path, err := conflist.Write(conflist.Options{ConfDir: t.TempDir(), BinDir: n.CNIBinDir, Socket: a.CNISocket, Bandwidth: true})
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.NetworkConfFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before := footprintOf(t, n)
	p := &pod{name: "bw", node: n, containerID: "chain-bw"}
	p.netns = createNetns(t, "qbw")
	rt := p.rt()
	rt.CapabilityArgs = map[string]any{"bandwidth": map[string]any{
		"ingressRate": 1000000, "ingressBurst": 100000, "egressRate": 1000000, "egressBurst": 100000}}
	// The runtime runs in the node's own namespace, where the host veth is;
	// bandwidth looks for it there.
	var res types.Result
	err = netns.Do(n.NetNS, func() error {
		var err error
		res, err = cniOf(n).AddNetworkList(context.Background(), list, rt)
		return err
	})
	if err != nil {
		t.Fatalf("ADD through switchyard + bandwidth: %v", err)
	}
	var out strings.Builder
	res.PrintTo(&out)
	hostIf := ""
	if f := footprintOf(t, n); len(f.links) == 1 {
		hostIf = f.links[0]
	} else {
		t.Fatalf("want one pod veth on the node, have %v", f.links)
	}
	qdisc, err := n.Exec("tc", "qdisc", "show", "dev", hostIf)
	if err != nil || !strings.Contains(qdisc, "tbf") {
		t.Errorf("bandwidth did not shape %s: %q %v\nresult: %s", hostIf, qdisc, err, out.String())
	}
	if err := netns.Do(n.NetNS, func() error { return cniOf(n).DelNetworkList(context.Background(), list, rt) }); err != nil {
		t.Errorf("DEL through the chain: %v", err)
	}
	if diff := diffFootprint(before, footprintOf(t, n)); diff != "" {
		t.Errorf("after chained DEL (-before +after):\n%s", diff)
	}
	if out, _ := n.Exec("ip", "-o", "link", "show", "type", "ifb"); strings.TrimSpace(out) != "" {
		t.Errorf("bandwidth's ifb device outlived DEL: %s", out)
	}
}
