package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"switchyard.dev/switchyard/itest/testenv"
)

// FieldManager names the harness in server-side applies.
const FieldManager = "switchyard-itest"

// Apply server-side-applies every object of a multi-document YAML, in
// order, as `kubectl apply --server-side -f` would. A kind that is not
// served yet (a custom resource whose CRD the same file just created) is
// retried until discovery knows it.
func (c *Cluster) Apply(t testenv.T, yaml []byte) {
	t.Helper()
	objs, resource := c.manifest(t, yaml)
	for _, obj := range objs {
		what := fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
		err := testenv.Eventually("apply "+what, 30*time.Second, 250*time.Millisecond, func() error {
			ri, err := resource(obj)
			if err != nil {
				return err
			}
			body, err := obj.MarshalJSON()
			if err != nil {
				return testenv.Permanent(err)
			}
			force := true
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = ri.Patch(ctx, obj.GetName(), "application/apply-patch+yaml", body,
				metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
			return err
		})
		if err != nil {
			t.Fatalf("%v", err)
		}
	}
}

// manifest decodes a multi-document YAML into its objects and returns a
// function giving each one's resource client (a namespaced one in its
// namespace, default if it names none). A kind discovery does not know
// yet resets the cached discovery, so a retry sees a CRD created since.
func (c *Cluster) manifest(t testenv.T, yaml []byte) ([]*unstructured.Unstructured, func(*unstructured.Unstructured) (dynamic.ResourceInterface, error)) {
	t.Helper()
	objs, err := decodeAll(yaml)
	if err != nil {
		t.Fatalf("decoding manifests: %v", err)
	}
	dyn, err := dynamic.NewForConfig(c.CP.Config)
	if err != nil {
		t.Fatalf("%v", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.CP.Config)
	if err != nil {
		t.Fatalf("%v", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return objs, func(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			mapper.Reset()
			return nil, err
		}
		if m.Scope.Name() != meta.RESTScopeNameNamespace {
			return dyn.Resource(m.Resource), nil
		}
		ns := obj.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		return dyn.Resource(m.Resource).Namespace(ns), nil
	}
}

func decodeAll(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}
