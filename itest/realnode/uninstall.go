package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"switchyard.dev/switchyard/itest/testenv"
)

// UninstallManifest returns manifests/uninstall.yaml.
func UninstallManifest(t testenv.T) []byte {
	t.Helper()
	root, err := testenv.SourceDir("..")
	if err != nil {
		t.Fatalf("%v", err)
	}
	b, err := os.ReadFile(filepath.Join(root, "manifests", "uninstall.yaml"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	return b
}

// workloads are the kinds whose objects run pods.
var workloads = []string{"DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job", "Pod"}

// Delete deletes every object of a multi-document YAML, as `kubectl delete
// -f` would, but in an order that lets pods end cleanly: the workloads
// first (foreground: their pods go first), waiting until every pod they
// ran is gone from the API, then the rest in reverse order of the file
// (so CRDs, RBAC and ConfigMaps the pods used outlive them).
func (c *Cluster) Delete(t testenv.T, yaml []byte, timeout time.Duration) {
	t.Helper()
	objs, resource := c.manifest(t, yaml)
	del := func(obj *unstructured.Unstructured) {
		t.Helper()
		ri, err := resource(obj)
		if err != nil {
			t.Fatalf("deleting %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		fg := metav1.DeletePropagationForeground
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	var rest []*unstructured.Unstructured
	var running []*unstructured.Unstructured
	for _, obj := range objs {
		if slices.Contains(workloads, obj.GetKind()) {
			del(obj)
			running = append(running, obj)
		} else {
			rest = append(rest, obj)
		}
	}
	err := testenv.Eventually("the workloads' pods gone", timeout, 500*time.Millisecond, func() error {
		for _, obj := range running {
			ri, err := resource(obj)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
			cancel()
			if err == nil {
				// Foreground deletion: the object goes after its pods.
				return fmt.Errorf("%s %s/%s still there", obj.GetKind(), obj.GetNamespace(), obj.GetName())
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, c.nodesDiag())
	}
	for i := len(rest) - 1; i >= 0; i-- {
		del(rest[i])
	}
}

// nodesDiag is, for a failure message, every node's addresses and the
// tail of its kubelet's log, and the pods of kube-system.
func (c *Cluster) nodesDiag() string {
	var b strings.Builder
	for _, n := range c.Nodes {
		out, err := testenv.Run("ip", "-n", n.NetNS, "-br", "addr")
		if err != nil {
			out = err.Error()
		}
		fmt.Fprintf(&b, "%s addresses:\n%s\n%s kubelet:\n%s\n", n.Name, out, n.Name, n.KubeletLog(15))
	}
	b.WriteString("kube-system:\n" + c.Describe("kube-system", 15))
	return b.String()
}
