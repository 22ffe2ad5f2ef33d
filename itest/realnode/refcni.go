package realnode

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/itest/upstream"
)

// RefNetwork is the name of the reference CNI network (the conflist name,
// and host-local's directory under /var/lib/cni/networks).
const RefNetwork = "refbridge"

// InstallReferenceCNI makes every node's pod network the reference
// plugins: bridge (cni0 as the pods' gateway) with host-local IPAM over the
// node's allocated PodCIDR, and loopback (containerd's CRI sets up lo with
// it). Routes are added the way a host-gw network would, with no
// masquerade (bridge's ipMasq needs iptables, which this machine lacks):
// each node routes the others' pod CIDRs to their node IPs, and the fabric
// (where the apiserver answers) routes every pod CIDR to its node.
// Installing the conflist is what turns the nodes Ready.
func (c *Cluster) InstallReferenceCNI(t testenv.T) {
	t.Helper()
	plugins, err := upstream.EnsureCNIPlugins(t.Logf)
	if err != nil {
		t.Fatalf("%v", err)
	}
	cidrs := map[string]string{}
	for _, n := range c.Nodes {
		err := c.WaitNode(n.Name, func(node *corev1.Node) error {
			if node.Spec.PodCIDR == "" {
				return fmt.Errorf("no PodCIDR allocated yet")
			}
			cidrs[n.Name] = node.Spec.PodCIDR
			return nil
		}, 60*time.Second)
		if err != nil {
			t.Fatalf("%v", err)
		}
	}
	for _, n := range c.Nodes {
		for _, p := range []string{"bridge", "host-local", "loopback"} {
			if err := copyFile(filepath.Join(plugins, p), filepath.Join(n.Private("/opt/cni/bin"), p), 0o755); err != nil {
				t.Fatalf("%s: installing %s: %v", n.Name, p, err)
			}
		}
		for _, o := range c.Nodes {
			if o != n {
				run(t, "ip", "-n", n.NetNS, "route", "replace", cidrs[o.Name], "via", o.IP.String())
			}
		}
		run(t, "ip", "-n", c.Fabric, "route", "replace", cidrs[n.Name], "via", n.IP.String())
		conf := map[string]any{
			"cniVersion": "1.0.0", "name": RefNetwork,
			"plugins": []any{map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": cidrs[n.Name]}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			}},
		}
		b, _ := json.MarshalIndent(conf, "", "  ")
		// Written last, and atomically: a temporary name libcni ignores,
		// renamed in the same directory. containerd reloads on the rename
		// (it ignores Create events, so a file moved in from elsewhere
		// would go unnoticed). Its appearance turns the node Ready.
		dst := filepath.Join(n.Private("/etc/cni/net.d"), "10-"+RefNetwork+".conflist")
		tmp := dst + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatalf("%v", err)
		}
		if err := os.Rename(tmp, dst); err != nil {
			t.Fatalf("%v", err)
		}
	}
}

// RemoveCNI deletes every node's CNI configuration and plugins, except
// loopback, which the node had before any CNI was installed.
func (c *Cluster) RemoveCNI(t testenv.T) {
	t.Helper()
	for _, n := range c.Nodes {
		for _, d := range []string{n.Private("/etc/cni/net.d"), n.Private("/opt/cni/bin")} {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				if e.Name() == "loopback" {
					continue
				}
				os.RemoveAll(filepath.Join(d, e.Name()))
			}
		}
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := filepath.Join(filepath.Dir(filepath.Dir(dst)), "."+filepath.Base(dst)+".tmp")
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
