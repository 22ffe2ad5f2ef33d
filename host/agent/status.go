package agent

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/host/kube"
	"switchyard.dev/switchyard/sdk"
)

// Status reporting: the agent keeps a cluster-scoped NodeAgent named
// after its node. It looks every statusCheck, writes when the status
// changed (a plugin restarted, readiness flipped) and otherwise renews the
// heartbeat every statusHeartbeat: an idle node writes once a minute, so
// 5,000 nodes cost the apiserver about 80 writes a second.
const (
	statusCheck     = 5 * time.Second
	statusHeartbeat = time.Minute
)

// NodeAgentStatus is the status the agent reports now (without heartbeat).
func (a *Agent) NodeAgentStatus() crdv1.NodeAgentStatus {
	f := a.NodeFacts()
	st := crdv1.NodeAgentStatus{AgentVersion: fmt.Sprintf("sdk-api-v%d", sdk.APIVersion), DatapathType: f.DatapathType,
		Node: crdv1.NodeAgentFacts{MTU: int32(f.MTU), PodMTU: int32(f.PodMTU), Uplink: f.Uplink}}
	for _, c := range f.PodCIDRs {
		st.Node.PodCIDRs = append(st.Node.PodCIDRs, c.String())
	}
	for _, ip := range f.NodeIPs {
		st.Node.NodeIPs = append(st.Node.NodeIPs, ip.String())
	}
	if f.GatewayIP.IsValid() {
		st.Node.GatewayIP = f.GatewayIP.String()
	}
	tables := map[string][]string{}
	for _, t := range a.Tables() {
		tables[t.Owner] = append(tables[t.Owner], t.Table)
	}
	for _, p := range a.Plugins() {
		st.Plugins = append(st.Plugins, crdv1.NodeAgentPlugin{Name: p.Name, Version: p.Version, State: p.State,
			Restarts: int32(p.Restarts), Flows: int32(p.Flows), Tables: tables[p.Name], LastError: p.LastError})
	}
	st.PluginCount = int32(len(st.Plugins))
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AllPluginsSynced", Message: "OVS connected, node facts known, every plugin synced"}
	if nr := a.NotReady(); len(nr) > 0 {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, notReadyReason(nr[0]), strings.Join(nr, "; ")
	}
	st.Conditions = []metav1.Condition{ready}
	return st
}

// notReadyReason turns the first NotReady line into a CamelCase reason.
func notReadyReason(line string) string {
	switch {
	case strings.HasPrefix(line, "OVS"):
		return "OVSDisconnected"
	case strings.HasPrefix(line, "plugin"):
		return "PluginNotSynced"
	case strings.Contains(line, "node facts") || strings.Contains(line, "Node"):
		return "NodeFactsUnknown"
	}
	return "NotReady"
}

// ReportStatus keeps the node's NodeAgent current until ctx ends.
func (a *Agent) ReportStatus(ctx context.Context, acc *kube.Access) (stop func(), err error) {
	dyn, err := dynamic.NewForConfig(acc.Config)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.reportStatus(ctx, dyn.Resource(crdv1.NodeAgentsResource), time.Now)
	}()
	return func() { cancel(); <-done }, nil
}

// statusClient is the slice of a dynamic resource client reportStatus uses.
type statusClient interface {
	Get(ctx context.Context, name string, o metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error)
	Create(ctx context.Context, obj *unstructured.Unstructured, o metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error)
	UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, o metav1.UpdateOptions) (*unstructured.Unstructured, error)
}

func (a *Agent) reportStatus(ctx context.Context, c statusClient, now func() time.Time) {
	t := time.NewTicker(statusCheck)
	defer t.Stop()
	var last *crdv1.NodeAgentStatus
	var lastWrite time.Time
	lastErr := ""
	for {
		st := a.NodeAgentStatus()
		// Conditions carry their own transition time; compare without it.
		if last == nil || !sameStatus(*last, st) || now().Sub(lastWrite) >= statusHeartbeat {
			if err := a.writeStatus(ctx, c, st, now()); err != nil {
				// Logged once per distinct error: a cluster without the
				// NodeAgent CRD would otherwise log every statusCheck.
				if err.Error() != lastErr {
					a.log.Warn("writing NodeAgent status (is the NodeAgent CRD installed and the agent's RBAC current?)", "node", a.NodeFacts().Name, "error", err)
				}
				lastErr = err.Error()
			} else {
				last, lastWrite, lastErr = &st, now(), ""
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func sameStatus(a, b crdv1.NodeAgentStatus) bool {
	a.Heartbeat, b.Heartbeat = metav1.Time{}, metav1.Time{}
	for i := range a.Conditions {
		a.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	for i := range b.Conditions {
		b.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return reflect.DeepEqual(a, b)
}

func (a *Agent) writeStatus(ctx context.Context, c statusClient, st crdv1.NodeAgentStatus, now time.Time) error {
	name := a.NodeFacts().Name
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	obj, err := c.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		na := &crdv1.NodeAgent{TypeMeta: metav1.TypeMeta{APIVersion: crdv1.SchemeGroupVersion.String(), Kind: "NodeAgent"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
		u, cerr := toUnstructured(na)
		if cerr != nil {
			return cerr
		}
		obj, err = c.Create(ctx, u, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	var cur crdv1.NodeAgent
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cur); err != nil {
		return err
	}
	// A condition keeps its transition time while its status holds.
	st.Heartbeat = metav1.NewTime(now)
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = metav1.NewTime(now)
		for _, old := range cur.Status.Conditions {
			if old.Type == st.Conditions[i].Type && old.Status == st.Conditions[i].Status {
				st.Conditions[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	cur.Status = st
	u, err := toUnstructured(&cur)
	if err != nil {
		return err
	}
	_, err = c.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	return err
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
