package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
)

// FieldManager is the server-side apply manager of the controller's
// status fields (status.egressIP, the IPAllocated condition, pool usage).
const FieldManager = "switchyard-controller-egress"

// Controller allocates Egress IPs. Every change of an Egress or a pool
// recomputes all allocations (Allocate is linear in Egresses plus taken
// addresses) and writes only the statuses that differ.
type Controller struct {
	dyn     dynamic.Interface
	log     *slog.Logger
	factory dynamicinformer.DynamicSharedInformerFactory
	egr     cache.SharedIndexInformer
	pools   cache.SharedIndexInformer
	kick    chan struct{}
}

// New returns a controller; Run starts it.
func New(dyn dynamic.Interface, log *slog.Logger) *Controller {
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	c := &Controller{dyn: dyn, log: log.With("component", "egress"), factory: f, kick: make(chan struct{}, 1),
		egr: f.ForResource(crdv1.EgressesResource).Informer(), pools: f.ForResource(crdv1.ExternalIPPoolsResource).Informer()}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.poke() },
		UpdateFunc: func(any, any) { c.poke() },
		DeleteFunc: func(any) { c.poke() },
	}
	c.egr.AddEventHandler(h)
	c.pools.AddEventHandler(h)
	return c
}

func (c *Controller) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run syncs until ctx ends. A failed write is retried after a second.
func (c *Controller) Run(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.egr.HasSynced, c.pools.HasSynced) {
		return ctx.Err()
	}
	c.log.Info("egress allocation started")
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	c.poke()
	for {
		select {
		case <-ctx.Done():
			c.factory.Shutdown()
			return nil
		case <-c.kick:
		case <-retry.C:
		}
		if err := c.sync(ctx); err != nil {
			c.log.Warn("egress sync failed; retrying", "error", err)
			retry.Reset(time.Second)
		}
	}
}

func decode[T any](obj any) (*T, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected %T", obj)
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, err
	}
	return out, nil
}

// sync recomputes every allocation and applies what differs.
func (c *Controller) sync(ctx context.Context) error {
	var pools []Pool
	poolObjs := map[string]*crdv1.ExternalIPPool{}
	for _, o := range c.pools.GetStore().List() {
		p, err := decode[crdv1.ExternalIPPool](o)
		if err != nil {
			return err
		}
		rs, perr := ParseRanges(p.Spec.IPRanges)
		if perr == nil {
			_, perr = ParseSubnet(p.Spec.SubnetInfo, p.Spec.IPRanges)
		}
		pools = append(pools, Pool{Name: p.Name, Ranges: rs, Err: perr})
		poolObjs[p.Name] = p
	}
	var reqs []Request
	egs := map[string]*crdv1.Egress{}
	for _, o := range c.egr.GetStore().List() {
		e, err := decode[crdv1.Egress](o)
		if err != nil {
			return err
		}
		egs[e.Name] = e
		r := Request{Name: e.Name, Created: e.CreationTimestamp.Time, Pool: e.Spec.ExternalIPPool, WantRaw: e.Spec.EgressIP}
		r.Want, _ = netip.ParseAddr(e.Spec.EgressIP)
		had := e.Status.EgressIPs
		if len(had) == 0 {
			had = []string{e.Status.EgressIP}
		}
		for _, h := range had {
			if a, err := netip.ParseAddr(h); err == nil {
				r.Had = append(r.Had, a)
			}
		}
		reqs = append(reqs, r)
	}
	res, usage := Allocate(pools, reqs)
	var errs []error
	// Releases first, so an IP moving between Egresses is never in two
	// statuses at once.
	for _, pass := range []bool{false, true} {
		for name, r := range res {
			if r.Allocated() != pass {
				continue
			}
			if err := c.applyEgress(ctx, egs[name], r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for name, u := range usage {
		p := poolObjs[name]
		if p.Status.Usage.Total == u.Total && p.Status.Usage.Used == u.Used {
			continue
		}
		if err := c.apply(ctx, crdv1.ExternalIPPoolsResource, "ExternalIPPool", name, map[string]any{
			"usage": map[string]any{"total": u.Total, "used": u.Used}}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d status writes failed, first: %w", len(errs), errs[0])
	}
	return nil
}

// applyEgress writes status.egressIP(s) and IPAllocated when they differ.
func (c *Controller) applyEgress(ctx context.Context, e *crdv1.Egress, r Result) error {
	status := metav1.ConditionFalse
	ip := ""
	var ips []string
	if r.Allocated() {
		status, ip = metav1.ConditionTrue, r.IPs[0].String()
		for _, a := range r.IPs {
			ips = append(ips, a.String())
		}
	}
	old := meta.FindStatusCondition(e.Status.Conditions, crdv1.ConditionIPAllocated)
	if e.Status.EgressIP == ip && slices.Equal(e.Status.EgressIPs, ips) && old != nil && old.Status == status && old.Reason == r.Reason && old.Message == r.Message &&
		old.ObservedGeneration == e.Generation {
		return nil
	}
	now := metav1.Now()
	if old != nil && old.Status == status {
		now = old.LastTransitionTime
	}
	cond := map[string]any{"type": crdv1.ConditionIPAllocated, "status": string(status), "reason": r.Reason, "message": r.Message,
		"observedGeneration": e.Generation, "lastTransitionTime": now.UTC().Format(time.RFC3339)}
	st := map[string]any{"conditions": []any{cond}}
	if ip != "" {
		st["egressIP"], st["egressIPs"] = ip, ips
	}
	// Without an IP the field is left out of the apply: the controller
	// stops owning it, and the apiserver removes it.
	if err := c.apply(ctx, crdv1.EgressesResource, "Egress", e.Name, st); err != nil {
		return err
	}
	c.log.Info("egress allocation", "egress", e.Name, "ips", ips, "reason", r.Reason, "message", r.Message)
	return nil
}

// apply server-side-applies the status of one object with FieldManager.
func (c *Controller) apply(ctx context.Context, gvr schema.GroupVersionResource, kind, name string, status map[string]any) error {
	body, err := json.Marshal(map[string]any{"apiVersion": crdv1.SchemeGroupVersion.String(), "kind": kind,
		"metadata": map[string]any{"name": name}, "status": status})
	if err != nil {
		return err
	}
	force := true
	_, err = c.dyn.Resource(gvr).Patch(ctx, name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager, Force: &force}, "status")
	if err != nil {
		return fmt.Errorf("%s %s status: %w", kind, name, err)
	}
	return nil
}
