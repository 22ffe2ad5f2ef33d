package cni

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/version"

	"switchyard.dev/switchyard/cni/conflist"
	"switchyard.dev/switchyard/itest/cluster"
)

// TestEverySpecVersion drives the built binary through libcni with a
// conflist of each supported cniVersion: ADD must return a result the
// runtime parses at that version, CHECK (0.4.0+) must pass, DEL must clean
// up, and STATUS and GC (1.1.0) must work.
func TestEverySpecVersion(t *testing.T) {
	_, n := node1(t, cluster.Options{})
	a := agentOf(t, n)
	before := footprintOf(t, n)
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			data, err := conflist.Render(conflist.Options{CNIVersion: v, Socket: a.CNISocket})
			if err != nil {
				t.Fatal(err)
			}
			list, err := libcni.NetworkConfFromBytes(data)
			if err != nil {
				t.Fatal(err)
			}
			name := "v" + strings.ReplaceAll(v, ".", "")
			p := &pod{name: name, node: n, netns: "", containerID: fmt.Sprintf("ver-%s", name)}
			p.netns = createNetns(t, "q"+name)
			cni := cniOf(n)
			ctx := context.Background()
			res, err := cni.AddNetworkList(ctx, list, p.rt())
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			if res.Version() != v && !(v == "0.3.0" && res.Version() == "0.4.0") {
				// 0.3.x results are the 0.4.0 type with the older cniVersion string.
				t.Logf("result type version %s for conflist %s", res.Version(), v)
			}
			var out strings.Builder
			if err := res.PrintTo(&out); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), fmt.Sprintf(`"cniVersion": %q`, v)) {
				t.Errorf("result is not at cniVersion %s:\n%s", v, out.String())
			}
			if _, err := version.NewResult(v, []byte(out.String())); err != nil {
				t.Errorf("result does not parse at %s: %v", v, err)
			}
			if v != "0.3.0" && v != "0.3.1" {
				if err := cni.CheckNetworkList(ctx, list, p.rt()); err != nil {
					t.Errorf("CHECK: %v", err)
				}
			}
			if v == "1.1.0" {
				if err := cni.GetStatusNetworkList(ctx, list); err != nil {
					t.Errorf("STATUS: %v", err)
				}
				// GC listing no valid attachment releases this one.
				if err := cni.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: nil}); err != nil {
					t.Errorf("GC: %v", err)
				}
				if f := footprintOf(t, n); len(f.ports) != 0 {
					t.Errorf("GC with no valid attachments left %d ports", len(f.ports))
				}
			}
			if err := cni.DelNetworkList(ctx, list, p.rt()); err != nil {
				t.Errorf("DEL: %v", err)
			}
		})
	}
	if diff := diffFootprint(before, footprintOf(t, n)); diff != "" {
		t.Errorf("after ADD/DEL at every version (-before +after):\n%s", diff)
	}
}
