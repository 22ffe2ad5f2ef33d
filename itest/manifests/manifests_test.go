// Package manifests_test applies the shipped manifests to a real
// kube-apiserver: the CRDs for real, everything else with a server-side dry
// run, so schema, defaulting and validation errors in what operators apply
// are caught here rather than in their clusters.
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

func decodeAll(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	b, err := fs.ReadFile(manifests.Files, name)
	if err != nil {
		t.Fatal(err)
	}
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

func TestManifestsApply(t *testing.T) {
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
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	ctx := context.Background()

	apply := func(obj *unstructured.Unstructured, dryRun bool) error {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return err
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		opts := metav1.CreateOptions{FieldValidation: "Strict"}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err = ri.Create(ctx, obj, opts)
		return err
	}

	crdFiles, err := fs.Glob(manifests.Files, "crds/*.yaml")
	if err != nil || len(crdFiles) == 0 {
		t.Fatalf("no CRDs embedded (%v)", err)
	}
	for _, f := range crdFiles {
		for _, obj := range decodeAll(t, f) {
			if err := apply(obj, false); err != nil {
				t.Fatalf("%s: creating %s %s: %v", f, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	// Custom resources are served only once the CRDs are established.
	if err := testenv.Eventually("CRDs to be served", 30*time.Second, 200*time.Millisecond, func() error {
		cached.Invalidate()
		mapper.Reset()
		_, err := mapper.RESTMapping(schemaGroupKind("crd.switchyard.dev", "Tier"))
		return err
	}); err != nil {
		t.Fatal(err)
	}

	for _, f := range []string{"rbac.yaml", "controller.yaml", "agent.yaml"} {
		objs := decodeAll(t, f)
		if len(objs) == 0 {
			t.Fatalf("%s has no objects", f)
		}
		for _, obj := range objs {
			if err := apply(obj, true); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Errorf("%s: %s %s/%s rejected by the apiserver: %v", f, obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
			}
		}
	}
}

func schemaGroupKind(group, kind string) (schema.GroupKind, string) {
	return schema.GroupKind{Group: group, Kind: kind}, "v1beta1"
}
