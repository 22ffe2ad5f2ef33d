package compute

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
)

// DefaultTier is the tier of a native policy that names none.
const DefaultTier = "application"

// BuiltinTiers are created by the controller at start, lowest priority value
// (evaluated first) first.
var BuiltinTiers = []struct {
	Name     string
	Priority int32
}{
	{"emergency", 50}, {"securityops", 100}, {"networkops", 150},
	{"platform", 200}, {"application", 250}, {"baseline", 253},
}

// groupDef is a ClusterGroup or Group as declared.
type groupDef struct {
	namespace string // "" for a ClusterGroup
	spec      crdv1.GroupSpec
}

func tierDep(name string) string { return "tier:" + name }
func cgDep(name string) string   { return "cg:" + name }
func ngDep(ns, name string) string {
	return "g:" + ns + "/" + name
}

// UpsertTier sets a tier's priority and recomputes the policies in it.
func (e *Engine) UpsertTier(name string, priority int32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.tiers[name]; ok && p == priority {
		return
	}
	e.tiers[name] = priority
	e.recompute(tierDep(name))
}

// DeleteTier removes a tier; its policies become invalid.
func (e *Engine) DeleteTier(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.tiers, name)
	e.recompute(tierDep(name))
}

// UpsertClusterGroup declares a ClusterGroup and recomputes its users.
func (e *Engine) UpsertClusterGroup(name string, spec crdv1.GroupSpec) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cgroups[name] = &groupDef{spec: spec}
	e.groupChanged("", name)
}

// DeleteClusterGroup removes a ClusterGroup; its users become invalid.
func (e *Engine) DeleteClusterGroup(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.cgroups, name)
	e.groupChanged("", name)
}

// UpsertGroup declares a namespaced Group and recomputes its users.
func (e *Engine) UpsertGroup(namespace, name string, spec crdv1.GroupSpec) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ngroups[namespace+"/"+name] = &groupDef{namespace: namespace, spec: spec}
	e.groupChanged(namespace, name)
}

// DeleteGroup removes a namespaced Group; its users become invalid.
func (e *Engine) DeleteGroup(namespace, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.ngroups, namespace+"/"+name)
	e.groupChanged(namespace, name)
}

// groupChanged recomputes the users of a group and marks it, and the groups
// naming it as a child, for the status writer.
func (e *Engine) groupChanged(namespace, name string) {
	dep, defs := cgDep(name), e.cgroups
	if namespace != "" {
		dep, defs = ngDep(namespace, name), e.ngroups
	}
	e.recompute(dep)
	e.dirtyGroups[GroupRef{namespace, name}] = struct{}{}
	for key, def := range defs {
		if def.namespace == namespace && slices.Contains(def.spec.ChildGroups, name) {
			_, parent, _ := strings.Cut(key, "/")
			if namespace == "" {
				parent = key
			}
			e.dirtyGroups[GroupRef{namespace, parent}] = struct{}{}
		}
	}
}

// GroupRef names a ClusterGroup (Namespace "") or a Group.
type GroupRef struct{ Namespace, Name string }

// DrainDirtyGroups returns the groups whose validity may have changed since
// the last call.
func (e *Engine) DrainDirtyGroups() []GroupRef {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := slices.Collect(maps.Keys(e.dirtyGroups))
	clear(e.dirtyGroups)
	return out
}

// GroupError says why a declared group cannot be used (bad CIDR, unknown or
// nested child groups, bad selector); nil when it is fine. exists is false
// for groups that are not declared.
func (e *Engine) GroupError(ref GroupRef) (exists bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ref.Namespace == "" {
		_, exists = e.cgroups[ref.Name]
	} else {
		_, exists = e.ngroups[ref.Namespace+"/"+ref.Name]
	}
	if !exists {
		return false, nil
	}
	_, _, err = e.resolveGroup(&nativeSource{namespace: ref.Namespace}, ref.Name, map[string]struct{}{})
	return true, err
}

// UpsertClusterNetworkPolicy computes a native ClusterNetworkPolicy. An
// invalid policy is taken out of the computation and the error returned; it
// is recomputed when the tier or group it lacked appears.
func (e *Engine) UpsertClusterNetworkPolicy(p *crdv1.ClusterNetworkPolicy) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.upsertNative(&nativeSource{kind: NativeClusterNetworkPolicy, name: p.Name, generation: p.Generation, spec: &p.Spec})
}

// DeleteClusterNetworkPolicy removes a native ClusterNetworkPolicy.
func (e *Engine) DeleteClusterNetworkPolicy(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.remove(NativeUID(NativeClusterNetworkPolicy, "", name))
}

// UpsertNativeNetworkPolicy computes a native namespaced NetworkPolicy.
func (e *Engine) UpsertNativeNetworkPolicy(p *crdv1.NetworkPolicy) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.upsertNative(&nativeSource{kind: NativeNetworkPolicy, namespace: p.Namespace, name: p.Name, generation: p.Generation, spec: &p.Spec})
}

// DeleteNativeNetworkPolicy removes a native namespaced NetworkPolicy.
func (e *Engine) DeleteNativeNetworkPolicy(namespace, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.remove(NativeUID(NativeNetworkPolicy, namespace, name))
}

// NativeUID is the UID of a native policy's internal Policy.
func NativeUID(kind SourceKind, namespace, name string) string {
	if kind == NativeClusterNetworkPolicy {
		return "cnp:" + name
	}
	return "snp:" + namespace + "/" + name
}

func (e *Engine) upsertNative(src *nativeSource) error {
	uid := NativeUID(src.kind, src.namespace, src.name)
	deps := map[string]struct{}{}
	pl, err := e.planNative(src, deps)
	meta := &Policy{UID: uid, Source: src.kind, Namespace: src.namespace, Name: src.name, Generation: src.generation}
	err = e.install(uid, true, src, pl, meta, err)
	e.setDeps(e.policyByUID[uid], slices.Sorted(maps.Keys(deps)))
	return err
}

// recompute recomputes every policy that depends on dep.
func (e *Engine) recompute(dep string) {
	ids := slices.Sorted(maps.Keys(e.dependents[dep]))
	for _, id := range ids {
		if src := e.policies[id].src; src != nil {
			_ = e.upsertNative(src)
		}
	}
}

func (e *Engine) setDeps(polID int32, deps []string) {
	rec := e.policies[polID]
	for _, d := range rec.deps {
		delete(e.dependents[d], polID)
		if len(e.dependents[d]) == 0 {
			delete(e.dependents, d)
		}
	}
	rec.deps = deps
	for _, d := range deps {
		if e.dependents[d] == nil {
			e.dependents[d] = map[int32]struct{}{}
		}
		e.dependents[d][polID] = struct{}{}
	}
}

func (e *Engine) planNative(src *nativeSource, deps map[string]struct{}) (*plan, error) {
	spec := src.spec
	tier := spec.Tier
	if tier == "" {
		tier = DefaultTier
	}
	deps[tierDep(tier)] = struct{}{}
	tp, ok := e.tiers[tier]
	if !ok {
		return nil, fmt.Errorf("%w %q: create the Tier or use one of the built-in tiers", ErrUnknownTier, tier)
	}
	pl := &plan{tierP: tp, prio: spec.Priority}
	if len(spec.AppliedTo) > 0 {
		for i, at := range spec.AppliedTo {
			gs, err := e.appliedToSpecs(src, at, deps)
			if err != nil {
				return nil, fmt.Errorf("appliedTo %d: %w", i, err)
			}
			pl.atgs = append(pl.atgs, gs...)
		}
	}
	for _, dir := range []Direction{Ingress, Egress} {
		rules := spec.Ingress
		if dir == Egress {
			rules = spec.Egress
		}
		for i, r := range rules {
			pr, err := e.planNativeRule(src, dir, i, &r, deps)
			if err != nil {
				return nil, fmt.Errorf("%s rule %d (%s): %w", dir, i, r.Name, err)
			}
			if len(spec.AppliedTo) > 0 && len(r.AppliedTo) > 0 {
				return nil, fmt.Errorf("%s rule %d (%s): %w: set appliedTo on the policy or on its rules, not both", dir, i, r.Name, ErrInvalid)
			}
			if len(spec.AppliedTo) == 0 && len(r.AppliedTo) == 0 {
				return nil, fmt.Errorf("%s rule %d (%s): %w: no appliedTo on the policy, so every rule needs one", dir, i, r.Name, ErrInvalid)
			}
			pl.rules = append(pl.rules, pr)
		}
	}
	if len(spec.AppliedTo) == 0 && len(pl.rules) == 0 {
		return nil, fmt.Errorf("%w: the policy has neither appliedTo nor rules", ErrInvalid)
	}
	return pl, nil
}

func (e *Engine) planNativeRule(src *nativeSource, dir Direction, i int, r *crdv1.Rule, deps map[string]struct{}) (planRule, error) {
	pr := planRule{rule: Rule{Name: r.Name, Direction: dir, Priority: int32(i), Logging: r.EnableLogging}}
	switch r.Action {
	case crdv1.RuleActionAllow:
		pr.rule.Action = Allow
	case crdv1.RuleActionDrop:
		pr.rule.Action = Drop
	case crdv1.RuleActionReject:
		pr.rule.Action = Reject
	case crdv1.RuleActionPass:
		pr.rule.Action = Pass
	default:
		return pr, fmt.Errorf("%w: action %q: use Allow, Drop, Reject or Pass", ErrInvalid, r.Action)
	}
	peers := r.From
	if dir == Egress {
		peers = r.To
	}
	if dir == Ingress && len(r.To) > 0 || dir == Egress && len(r.From) > 0 {
		return pr, fmt.Errorf("%w: an ingress rule takes from, an egress rule takes to", ErrInvalid)
	}
	pr.rule.AnyPeer = len(peers) == 0
	for j, peer := range peers {
		set := 0
		for _, b := range []bool{peer.PodSelector != nil || peer.NamespaceSelector != nil, peer.IPBlock != nil, peer.Group != ""} {
			if b {
				set++
			}
		}
		if set != 1 {
			return pr, fmt.Errorf("peer %d: %w: set exactly one of selectors, ipBlock or group", j, ErrInvalid)
		}
		switch {
		case peer.IPBlock != nil:
			b, err := parseIPBlock(peer.IPBlock.CIDR, peer.IPBlock.Except)
			if err != nil {
				return pr, fmt.Errorf("peer %d: %w", j, err)
			}
			pr.rule.IPBlocks = append(pr.rule.IPBlocks, b)
		case peer.Group != "":
			gs, blocks, err := e.resolveGroup(src, peer.Group, deps)
			if err != nil {
				return pr, fmt.Errorf("peer %d: %w", j, err)
			}
			pr.peers = append(pr.peers, gs...)
			pr.rule.IPBlocks = append(pr.rule.IPBlocks, blocks...)
		default:
			gs, err := e.selectorSpec(src, peer.PodSelector, peer.NamespaceSelector)
			if err != nil {
				return pr, fmt.Errorf("peer %d: %w", j, err)
			}
			pr.peers = append(pr.peers, gs)
		}
	}
	for _, p := range r.Ports {
		port, err := convertPort(p.Protocol, p.Port, p.EndPort)
		if err != nil {
			return pr, err
		}
		pr.rule.Ports = append(pr.rule.Ports, port)
	}
	for k, at := range r.AppliedTo {
		gs, err := e.appliedToSpecs(src, at, deps)
		if err != nil {
			return pr, fmt.Errorf("appliedTo %d: %w", k, err)
		}
		pr.atgs = append(pr.atgs, gs...)
	}
	return pr, nil
}

// selectorSpec: in a ClusterNetworkPolicy a pod selector alone selects in
// every namespace; in a namespaced policy, in the policy's namespace.
func (e *Engine) selectorSpec(src *nativeSource, podSel, nsSel *metav1.LabelSelector) (groupSpec, error) {
	if podSel == nil && nsSel == nil {
		return groupSpec{}, fmt.Errorf("%w: set podSelector and/or namespaceSelector", ErrInvalid)
	}
	if nsSel == nil && src.namespace != "" {
		return e.nsGroupSpec(src.namespace, podSel)
	}
	return e.clusterGroupSpec(nsSel, podSel)
}

func (e *Engine) appliedToSpecs(src *nativeSource, at crdv1.AppliedTo, deps map[string]struct{}) ([]groupSpec, error) {
	if at.Group != "" {
		if at.PodSelector != nil || at.NamespaceSelector != nil {
			return nil, fmt.Errorf("%w: appliedTo sets both group and selectors", ErrInvalid)
		}
		gs, blocks, err := e.resolveGroup(src, at.Group, deps)
		if err != nil {
			return nil, err
		}
		if len(blocks) > 0 {
			return nil, fmt.Errorf("%w: group %q has ipBlocks and cannot be an appliedTo", ErrInvalid, at.Group)
		}
		return gs, nil
	}
	gs, err := e.selectorSpec(src, at.PodSelector, at.NamespaceSelector)
	if err != nil {
		return nil, err
	}
	return []groupSpec{gs}, nil
}

// resolveGroup expands a ClusterGroup (cluster policies) or Group (namespaced
// policies) and its children into pod selectors and IP blocks.
func (e *Engine) resolveGroup(src *nativeSource, name string, deps map[string]struct{}) ([]groupSpec, []IPBlock, error) {
	lookup := func(n string) (*groupDef, string) {
		if src.namespace == "" {
			return e.cgroups[n], cgDep(n)
		}
		return e.ngroups[src.namespace+"/"+n], ngDep(src.namespace, n)
	}
	kind := "ClusterGroup"
	if src.namespace != "" {
		kind = "Group in namespace " + src.namespace
	}
	var specs []groupSpec
	var blocks []IPBlock
	var walk func(n string, depth int) error
	walk = func(n string, depth int) error {
		def, dep := lookup(n)
		deps[dep] = struct{}{}
		if def == nil {
			return fmt.Errorf("%w: %s %q does not exist", ErrUnknownGroup, kind, n)
		}
		if def.spec.PodSelector != nil || def.spec.NamespaceSelector != nil {
			gs, err := e.selectorSpec(&nativeSource{namespace: def.namespace}, def.spec.PodSelector, def.spec.NamespaceSelector)
			if err != nil {
				return fmt.Errorf("group %q: %w", n, err)
			}
			specs = append(specs, gs)
		}
		for _, b := range def.spec.IPBlocks {
			pb, err := parseIPBlock(b.CIDR, b.Except)
			if err != nil {
				return fmt.Errorf("group %q: %w", n, err)
			}
			blocks = append(blocks, pb)
		}
		for _, c := range def.spec.ChildGroups {
			if depth > 0 {
				return fmt.Errorf("%w: group %q is a child of another group and may not have children", ErrInvalid, n)
			}
			if err := walk(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(name, 0); err != nil {
		return nil, nil, err
	}
	return specs, blocks, nil
}
