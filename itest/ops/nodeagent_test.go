package ops

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/manifests"
)

// installCRDs applies the named CRDs of manifests/crds (by plural
// resource name) and waits until the apiserver serves each.
func installCRDs(t testenv.T, cp *controlplane.ControlPlane, plurals ...string) {
	t.Helper()
	for _, p := range plurals {
		installCRD(t, cp, p)
	}
}

func installCRD(t testenv.T, cp *controlplane.ControlPlane, plural string) {
	t.Helper()
	raw, err := fs.ReadFile(manifests.Files, "crds/crd.switchyard.dev_"+plural+".yaml")
	if err != nil {
		t.Fatalf("%v", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatalf("decoding the %s CRD: %v", plural, err)
	}
	c, err := apiextclient.NewForConfig(cp.Config)
	if err != nil {
		t.Fatalf("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the %s CRD: %v", plural, err)
	}
	err = testenv.Eventually(plural+" CRD established", 30*time.Second, 50*time.Millisecond, func() error {
		got, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return errors.New("not established")
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
}

// nodeAgent reads a node's NodeAgent from the apiserver.
func (e *env) nodeAgent(name string) (*crdv1.NodeAgent, error) {
	dyn, err := dynamic.NewForConfig(e.cp.Config)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u, err := dyn.Resource(crdv1.NodeAgentsResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var na crdv1.NodeAgent
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &na); err != nil {
		return nil, err
	}
	return &na, nil
}

func plugin(na *crdv1.NodeAgent, name string) (crdv1.NodeAgentPlugin, error) {
	for _, p := range na.Status.Plugins {
		if p.Name == name {
			return p, nil
		}
	}
	return crdv1.NodeAgentPlugin{}, fmt.Errorf("NodeAgent %s lists no plugin %s: %+v", na.Name, name, na.Status.Plugins)
}

func ready(na *crdv1.NodeAgent) (metav1.Condition, bool) {
	for _, c := range na.Status.Conditions {
		if c.Type == "Ready" {
			return c, true
		}
	}
	return metav1.Condition{}, false
}
