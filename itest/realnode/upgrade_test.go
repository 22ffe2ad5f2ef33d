package realnode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/realnode"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/manifests/image"
)

// retag writes the image tagged from in archive under the tag to, as a
// new release of the same build would be: the rollout replaces every agent
// pod all the same.
func retag(t *testing.T, archive, from, to string) string {
	t.Helper()
	img, err := image.ReadArchive(archive, from)
	if err != nil {
		t.Fatalf("reading %s from %s: %v", from, archive, err)
	}
	out := filepath.Join(testenv.Dir(t, "next"), "agent-next.tar")
	if err := image.WriteArchive(out, to, img); err != nil {
		t.Fatalf("writing %s: %v", out, err)
	}
	return out
}

// TestAgentRollingUpdate: a pod keeps talking to a pod on the other node,
// one UDP request every 20 ms, while the agent DaemonSet rolls to a new
// image node by node. The agent owns no packet path: the flows stay in
// ovs-vswitchd (its own DaemonSet, untouched) while the agent restarts and
// re-syncs, so not one request may be lost.
func TestAgentRollingUpdate(t *testing.T) {
	imgs := realnode.ProductImages(t)
	v, err := os.ReadFile("../../manifests/VERSION")
	if err != nil {
		t.Fatal(err)
	}
	oldRef := "switchyard/switchyard-agent:" + strings.TrimSpace(string(v))
	newRef := oldRef + "-next"
	c := realnode.Start(t, realnode.Options{Nodes: 2, Images: append(imgs, retag(t, imgs[0], oldRef, newRef))})
	c.Apply(t, realnode.Manifest(t))
	for _, n := range c.Nodes {
		if err := c.WaitNode(n.Name, realnode.Ready(true), 180*time.Second); err != nil {
			t.Fatalf("%v\nkube-system:\n%s", err, c.Describe("kube-system", 15))
		}
	}
	pair := c.NewUDPPair(t, "default", c.Nodes[0], c.Nodes[1])

	// A change of an OVS port's MTU makes ovs-vswitchd reconfigure its
	// userspace datapath, and packets met meanwhile are dropped; a
	// restarting agent must leave the gateway as it is (its MTU flapped
	// while the tunnel plugin was still to start, and a request was lost
	// in about half the runs).
	gwChanges := watchGatewayMTU(t, c.Nodes)

	stopStream := pair.Stream()

	ctx := context.Background()
	ds, err := c.CP.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "switchyard-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Every container of the agent pod that runs the agent image moves to
	// the new one, as `kubectl set image` would.
	var patch []map[string]any
	for kind, cs := range map[string][]corev1.Container{"initContainers": ds.Spec.Template.Spec.InitContainers, "containers": ds.Spec.Template.Spec.Containers} {
		for i, ctr := range cs {
			if ctr.Image == oldRef {
				patch = append(patch, map[string]any{"op": "replace", "path": fmt.Sprintf("/spec/template/spec/%s/%d/image", kind, i), "value": newRef})
			}
		}
	}
	if len(patch) == 0 {
		t.Fatalf("no container of the agent DaemonSet runs %s", oldRef)
	}
	body, _ := json.Marshal(patch)
	started := time.Now()
	if _, err := c.CP.Client.AppsV1().DaemonSets("kube-system").Patch(ctx, "switchyard-agent", types.JSONPatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	err = c.WaitDaemonSetRolled("kube-system", "switchyard-agent", "app=switchyard,component=agent", func(p *corev1.Pod) error {
		if img := p.Spec.Containers[0].Image; img != newRef {
			return fmt.Errorf("still runs %s", img)
		}
		return nil
	}, 240*time.Second)
	rolled := time.Since(started)
	time.Sleep(2 * time.Second) // the new agents' first seconds, under traffic
	res := stopStream()
	if err != nil {
		t.Fatalf("%v\n%s", err, c.Describe("kube-system", 15))
	}
	sent, lost := res.Sent, res.Lost
	t.Logf("rollout started %s", started.Format("15:04:05.000"))
	t.Logf("rolled 2 agent pods to %s in %v; %d requests pod to pod across nodes, %d lost", newRef, rolled.Round(time.Millisecond), sent, len(lost))
	if sent < 100 {
		t.Errorf("only %d requests sent during the rollout", sent)
	}
	if ch := gwChanges(); len(ch) > 0 {
		t.Errorf("the gateway's MTU changed during the rollout:\n%s", strings.Join(ch, "\n"))
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d requests lost during the rollout:\n%s", len(lost), sent, strings.Join(lost, "\n"))
	}
}

// watchGatewayMTU follows the podnet gateway (sy-gw0) of every node through
// netlink until the test ends; the function it returns lists the MTU
// changes seen so far.
func watchGatewayMTU(t *testing.T, nodes []*realnode.Node) func() []string {
	t.Helper()
	var mu sync.Mutex
	var changes []string
	for _, n := range nodes {
		var mtu int
		updates, done := make(chan netlink.LinkUpdate, 64), make(chan struct{})
		err := netns.Do(n.NetNS, func() error {
			l, err := netlink.LinkByName("sy-gw0")
			if err != nil {
				return err
			}
			mtu = l.Attrs().MTU
			return netlink.LinkSubscribe(updates, done)
		})
		if err != nil {
			t.Fatalf("watching %s's gateway: %v", n.Name, err)
		}
		t.Cleanup(func() { close(done) })
		go func() {
			for u := range updates {
				if a := u.Link.Attrs(); a.Name == "sy-gw0" && a.MTU != mtu {
					mu.Lock()
					changes = append(changes, fmt.Sprintf("%s %s: sy-gw0 MTU %d (was %d)", time.Now().Format("15:04:05.000"), n.Name, a.MTU, mtu))
					mu.Unlock()
				}
			}
		}()
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(changes)
	}
}
