package netpolmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/itest/testenv"
)

// AppliedToPod is a ClusterNetworkPolicy's appliedTo for one model pod.
func AppliedToPod(ns, pod string) []crdv1.AppliedTo {
	return []crdv1.AppliedTo{{PodSelector: Labels("pod", pod), NamespaceSelector: Labels("ns", ns)}}
}

// ApplyClusterPolicy creates or replaces a ClusterNetworkPolicy.
func (e *Env) ApplyClusterPolicy(t testenv.T, name string, spec crdv1.PolicySpec) {
	t.Helper()
	ApplyClusterPolicy(t, e.CP.Config, name, spec)
}

// ApplyClusterPolicy creates or replaces a ClusterNetworkPolicy through the
// apiserver cfg names.
func ApplyClusterPolicy(t testenv.T, cfg *rest.Config, name string, spec crdv1.PolicySpec) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("%v", err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		t.Fatalf("%v", err)
	}
	o := &unstructured.Unstructured{Object: map[string]any{"spec": u}}
	o.SetAPIVersion(crdv1.SchemeGroupVersion.String())
	o.SetKind("ClusterNetworkPolicy")
	o.SetName(name)
	r := dyn.Resource(crdv1.ClusterNetworkPoliciesResource)
	ctx := context.Background()
	cur, err := r.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		o.SetResourceVersion(cur.GetResourceVersion())
		_, err = r.Update(ctx, o, metav1.UpdateOptions{})
	} else {
		_, err = r.Create(ctx, o, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("applying ClusterNetworkPolicy %s: %v", name, err)
	}
}

// DeleteClusterPolicies removes every ClusterNetworkPolicy.
func (e *Env) DeleteClusterPolicies(t testenv.T) {
	t.Helper()
	DeleteClusterPolicies(t, e.CP.Config)
}

// DeleteClusterPolicies removes every ClusterNetworkPolicy through the
// apiserver cfg names.
func DeleteClusterPolicies(t testenv.T, cfg *rest.Config) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err == nil {
		err = dyn.Resource(crdv1.ClusterNetworkPoliciesResource).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	}
	if err != nil {
		t.Fatalf("deleting ClusterNetworkPolicies: %v", err)
	}
}

// PluginInfo is the agent's view of one plugin.
type PluginInfo struct {
	Name         string `json:"name"`
	State        string `json:"state"`
	PID          int    `json:"pid"`
	Restarts     int    `json:"restarts"`
	Flows        int    `json:"flows"`
	CookiePrefix uint16 `json:"cookiePrefix"`
}

// Plugin asks node's agent about plugin name.
func (e *Env) Plugin(t testenv.T, node, name string) PluginInfo {
	t.Helper()
	code, body, err := e.Agents[node].Get("/v1/plugins")
	if err != nil || code != 200 {
		t.Fatalf("%s: GET /v1/plugins: %d %v %s", node, code, err, body)
	}
	var ps []PluginInfo
	if err := json.Unmarshal([]byte(body), &ps); err != nil {
		t.Fatalf("%s: /v1/plugins: %v", node, err)
	}
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("%s runs no plugin %s", node, name)
	return PluginInfo{}
}

// KillPlugin kills plugin name on node with SIGKILL and waits until the
// agent runs a new incarnation of it.
func (e *Env) KillPlugin(t testenv.T, node, name string) {
	t.Helper()
	old := e.Plugin(t, node, name)
	if err := syscall.Kill(old.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %s on %s (pid %d): %v", name, node, old.PID, err)
	}
	err := testenv.Eventually(fmt.Sprintf("%s on %s to run and sync again after kill -9", name, node), 30*time.Second, 50*time.Millisecond, func() error {
		p := e.Plugin(t, node, name)
		if p.PID == old.PID || p.PID == 0 || p.State != "synced" {
			return fmt.Errorf("state %s pid %d", p.State, p.PID)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
}

// NetpolDir is netpol's state directory on node (decisions.log,
// counters.json, policy.state).
func (e *Env) NetpolDir(node string) string {
	return filepath.Join(e.Cluster.Node(node).Dir, "netpol")
}

// ClusterPolicyStatus returns a ClusterNetworkPolicy's status and generation.
func (e *Env) ClusterPolicyStatus(t testenv.T, name string) (crdv1.PolicyStatus, int64) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(e.CP.Config)
	if err != nil {
		t.Fatalf("%v", err)
	}
	u, err := dyn.Resource(crdv1.ClusterNetworkPoliciesResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting ClusterNetworkPolicy %s: %v", name, err)
	}
	var cnp crdv1.ClusterNetworkPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cnp); err != nil {
		t.Fatalf("%v", err)
	}
	return cnp.Status, cnp.Generation
}
