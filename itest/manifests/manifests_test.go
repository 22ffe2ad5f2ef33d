// Package manifests_test applies the shipped manifests to a real
// kube-apiserver: the CRDs for real, everything else with a server-side dry
// run, so schema, defaulting and validation errors in what operators apply
// are caught here rather than in their clusters. It does so for the parts
// in manifests/ and for the rendered one-file switchyard.yml.
package manifests_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/manifests"
)

func decode(t *testing.T, name string, b []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

func decodeAll(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	b, err := fs.ReadFile(manifests.Files, name)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, name, b)
}

// cluster applies objects to a fresh control plane.
type cluster struct {
	t      *testing.T
	dyn    *dynamic.DynamicClient
	cached discovery.CachedDiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newCluster(t *testing.T) *cluster {
	cp := controlplane.Start(t)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	cached := memory.NewMemCacheClient(dc)
	return &cluster{t: t, dyn: dyn, cached: cached, mapper: restmapper.NewDeferredDiscoveryRESTMapper(cached)}
}

func (c *cluster) apply(obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = c.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = c.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	opts := metav1.CreateOptions{FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Create(context.Background(), obj, opts)
	return err
}

// applyAll creates the CRDs among objs for real, waits until they are
// served, then dry-runs everything else.
func (c *cluster) applyAll(what string, objs []*unstructured.Unstructured) {
	t := c.t
	var rest []*unstructured.Unstructured
	crds := 0
	for _, obj := range objs {
		if obj.GetKind() != "CustomResourceDefinition" {
			rest = append(rest, obj)
			continue
		}
		crds++
		if err := c.apply(obj, false); err != nil {
			t.Fatalf("%s: creating %s %s: %v", what, obj.GetKind(), obj.GetName(), err)
		}
	}
	if crds > 0 {
		// Custom resources are served only once the CRDs are established.
		if err := testenv.Eventually("CRDs to be served", 30*time.Second, 200*time.Millisecond, func() error {
			c.cached.Invalidate()
			c.mapper.Reset()
			_, err := c.mapper.RESTMapping(schemaGroupKind("crd.switchyard.dev", "Tier"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, obj := range rest {
		if err := c.apply(obj, true); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("%s: %s %s/%s rejected by the apiserver: %v", what, obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

func TestManifestsApply(t *testing.T) {
	c := newCluster(t)
	crdFiles, err := fs.Glob(manifests.Files, "crds/*.yaml")
	if err != nil || len(crdFiles) == 0 {
		t.Fatalf("no CRDs embedded (%v)", err)
	}
	var crds []*unstructured.Unstructured
	for _, f := range crdFiles {
		crds = append(crds, decodeAll(t, f)...)
	}
	c.applyAll("crds/", crds)
	for _, f := range []string{"rbac.yaml", "controller.yaml", "ovs.yaml", "agent.yaml", "uninstall.yaml"} {
		objs := decodeAll(t, f)
		if len(objs) == 0 {
			t.Fatalf("%s has no objects", f)
		}
		c.applyAll(f, objs)
	}
}

// The one file an operator applies: every object the parts hold, in an
// order kubectl apply can follow (CRDs first).
func TestRenderedManifestApplies(t *testing.T) {
	objs := decodeAll(t, "switchyard.yml")
	kinds := map[string]int{}
	for i, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() == "CustomResourceDefinition" && i >= kinds["CustomResourceDefinition"] {
			t.Errorf("CRD %s comes after other objects", o.GetName())
		}
	}
	for kind, n := range map[string]int{"CustomResourceDefinition": 9, "DaemonSet": 2, "Deployment": 1, "ConfigMap": 1, "ClusterRole": 2} {
		if kinds[kind] < n {
			t.Errorf("switchyard.yml has %d %s, want at least %d", kinds[kind], kind, n)
		}
	}
	newCluster(t).applyAll("switchyard.yml", objs)
}

func schemaGroupKind(group, kind string) (schema.GroupKind, string) {
	return schema.GroupKind{Group: group, Kind: kind}, "v1beta1"
}
