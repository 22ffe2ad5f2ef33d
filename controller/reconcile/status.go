package reconcile

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	"switchyard.dev/switchyard/controller/compute"
)

// ConditionValid is the condition type saying whether a native policy could
// be computed; when False its message says what is wrong.
const ConditionValid = "Valid"

// statusWriter writes status onto native policies whose computation or
// realization changed. It batches: changes are collected and written at
// most every interval.
type statusWriter struct {
	c        *Controller
	interval time.Duration

	mu      sync.Mutex
	pending map[string]struct{}
	kick    chan struct{}
	// pendingGroups is only touched by run.
	pendingGroups map[compute.GroupRef]struct{}
}

func newStatusWriter(c *Controller) *statusWriter {
	return &statusWriter{c: c, interval: 200 * time.Millisecond, pending: map[string]struct{}{}, kick: make(chan struct{}, 1),
		pendingGroups: map[compute.GroupRef]struct{}{}}
}

// RealizationChanged is the distribute.Realization callback.
func (c *Controller) RealizationChanged(uids []string) {
	w := c.status
	w.mu.Lock()
	for _, u := range uids {
		w.pending[u] = struct{}{}
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *statusWriter) run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.kick:
		}
		w.mu.Lock()
		for _, u := range w.c.engine.DrainDirty() {
			w.pending[u] = struct{}{}
		}
		todo := w.pending
		w.pending = map[string]struct{}{}
		w.mu.Unlock()
		for _, ref := range w.c.engine.DrainDirtyGroups() {
			w.pendingGroups[ref] = struct{}{}
		}
		groups := w.pendingGroups
		w.pendingGroups = map[compute.GroupRef]struct{}{}
		for ref := range groups {
			if err := w.writeGroup(ctx, ref); err != nil {
				w.c.log.Warn("writing group status failed; will retry", "namespace", ref.Namespace, "group", ref.Name, "err", err)
				w.pendingGroups[ref] = struct{}{}
			}
		}
		for uid := range todo {
			if strings.HasPrefix(uid, "k8s:") {
				continue
			}
			if err := w.write(ctx, uid); err != nil {
				w.c.log.Warn("writing policy status failed; will retry", "policy", uid, "err", err)
				w.mu.Lock()
				w.pending[uid] = struct{}{}
				w.mu.Unlock()
			}
		}
	}
}

func (w *statusWriter) write(ctx context.Context, uid string) error {
	info, ok := w.c.engine.Policy(uid)
	if !ok {
		return nil // deleted
	}
	var gvr schema.GroupVersionResource
	var ns, name string
	if rest, ok := strings.CutPrefix(uid, "cnp:"); ok {
		gvr, name = crdv1.ClusterNetworkPoliciesResource, rest
	} else if rest, ok := strings.CutPrefix(uid, "snp:"); ok {
		gvr = crdv1.NetworkPoliciesResource
		ns, name, _ = strings.Cut(rest, "/")
	} else {
		return fmt.Errorf("unknown policy UID %q", uid)
	}
	k := kCNP
	if ns != "" {
		k = kNP
	}
	obj, exists, err := w.c.get(key{k, ns, name})
	if err != nil || !exists {
		return err
	}
	u := obj.(*unstructured.Unstructured).DeepCopy()
	var st crdv1.PolicyStatus
	if raw, ok := u.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st)
	}
	want := st.DeepCopy()
	gen := u.GetGeneration()
	want.ObservedGeneration = gen
	cond := metav1.Condition{Type: ConditionValid, ObservedGeneration: gen}
	if info.Err != nil {
		want.Phase = crdv1.PolicyFailed
		want.CurrentNodesRealized, want.DesiredNodesRealized = 0, 0
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Invalid", info.Err.Error()
	} else {
		if info.Generation != gen {
			return fmt.Errorf("engine has generation %d, object %d: not computed yet", info.Generation, gen)
		}
		want.DesiredNodesRealized = int32(len(info.Nodes))
		want.CurrentNodesRealized = int32(w.c.realization.Count(uid, gen, info.Nodes))
		want.Phase = crdv1.PolicyRealizing
		if want.CurrentNodesRealized == want.DesiredNodesRealized {
			want.Phase = crdv1.PolicyRealized
		}
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "Computed", "the policy was computed"
	}
	meta.SetStatusCondition(&want.Conditions, cond)
	if equalStatus(&st, want) {
		return nil
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return err
	}
	u.Object["status"] = raw
	_, err = w.c.dyn.Resource(gvr).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		w.c.log.Info("policy status", "policy", uid, "phase", want.Phase, "realized", want.CurrentNodesRealized, "of", want.DesiredNodesRealized)
	}
	return err
}

func equalStatus(a, b *crdv1.PolicyStatus) bool {
	if a.Phase != b.Phase || a.ObservedGeneration != b.ObservedGeneration || a.CurrentNodesRealized != b.CurrentNodesRealized ||
		a.DesiredNodesRealized != b.DesiredNodesRealized || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}

// writeGroup sets the Valid condition of a ClusterGroup or Group.
func (w *statusWriter) writeGroup(ctx context.Context, ref compute.GroupRef) error {
	exists, gerr := w.c.engine.GroupError(ref)
	if !exists {
		return nil
	}
	k, gvr := kClusterGroup, crdv1.ClusterGroupsResource
	if ref.Namespace != "" {
		k, gvr = kGroup, crdv1.GroupsResource
	}
	obj, exists, err := w.c.get(key{k, ref.Namespace, ref.Name})
	if err != nil || !exists {
		return err
	}
	u := obj.(*unstructured.Unstructured).DeepCopy()
	var st crdv1.GroupStatus
	if raw, ok := u.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st)
	}
	cond := metav1.Condition{Type: ConditionValid, ObservedGeneration: u.GetGeneration(), Status: metav1.ConditionTrue, Reason: "Resolved", Message: "the group resolves"}
	if gerr != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Invalid", gerr.Error()
	}
	if old := meta.FindStatusCondition(st.Conditions, ConditionValid); old != nil && old.Status == cond.Status && old.Message == cond.Message && old.ObservedGeneration == cond.ObservedGeneration {
		return nil
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	u.Object["status"] = raw
	_, err = w.c.dyn.Resource(gvr).Namespace(ref.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
