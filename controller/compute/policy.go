package compute

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
)

// Errors that make a policy invalid. They are wrapped with the detail of what
// was wrong; test with errors.Is.
var (
	ErrUnknownTier  = errors.New("unknown tier")
	ErrUnknownGroup = errors.New("unknown group")
	ErrInvalidCIDR  = errors.New("invalid CIDR")
	ErrInvalid      = errors.New("invalid policy")
)

// policy is the engine's record of one source policy.
type policy struct {
	uid    string
	native bool
	out    *Policy // nil while invalid
	err    error
	atgs   []int32    // distinct ATGs of all rules and of the policy
	edges  [][2]int32 // (ATG, AG) increments made, to undo
	refs   []int32    // acquired groups, to release
	deps   []string   // tier and group names the computation used
	src    *nativeSource
}

type nativeSource struct {
	kind       SourceKind
	namespace  string
	name       string
	generation int64
	spec       *crdv1.PolicySpec
}

// plan is a compiled policy before its groups are acquired.
type plan struct {
	atgs  []groupSpec
	rules []planRule
	isoIn bool
	isoEg bool
	tierP int32
	prio  int32
}

type planRule struct {
	rule  Rule // groups are filled in at install
	peers []groupSpec
	atgs  []groupSpec // nil: the policy's
}

// UpsertKubernetesNetworkPolicy computes a networking/v1 NetworkPolicy. An
// invalid policy (a bad CIDR the apiserver let through) is removed from the
// computation and the error returned.
func (e *Engine) UpsertKubernetesNetworkPolicy(np *networkingv1.NetworkPolicy) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	uid := "k8s:" + np.Namespace + "/" + np.Name
	pl, err := e.planKubernetes(np)
	meta := &Policy{UID: uid, Source: KubernetesNetworkPolicy, Namespace: np.Namespace, Name: np.Name, Generation: np.Generation}
	return e.install(uid, false, nil, pl, meta, err)
}

// DeleteKubernetesNetworkPolicy removes a networking/v1 NetworkPolicy.
func (e *Engine) DeleteKubernetesNetworkPolicy(namespace, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.remove("k8s:" + namespace + "/" + name)
}

func (e *Engine) planKubernetes(np *networkingv1.NetworkPolicy) (*plan, error) {
	ns := np.Namespace
	pl := &plan{tierP: KubernetesTierPriority}
	atg, err := e.nsGroupSpec(ns, &np.Spec.PodSelector)
	if err != nil {
		return nil, fmt.Errorf("podSelector: %w", err)
	}
	pl.atgs = []groupSpec{atg}
	types := np.Spec.PolicyTypes
	if len(types) == 0 {
		// Defaulting as the API documents: Ingress always, Egress when the
		// policy has egress rules.
		types = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) > 0 {
			types = append(types, networkingv1.PolicyTypeEgress)
		}
	}
	for _, t := range types {
		switch t {
		case networkingv1.PolicyTypeIngress:
			pl.isoIn = true
		case networkingv1.PolicyTypeEgress:
			pl.isoEg = true
		}
	}
	addRules := func(dir Direction, n int, peersOf func(int) []networkingv1.NetworkPolicyPeer, portsOf func(int) []networkingv1.NetworkPolicyPort) error {
		for i := 0; i < n; i++ {
			pr := planRule{rule: Rule{Direction: dir, Action: Allow, Priority: int32(i)}}
			peers := peersOf(i)
			pr.rule.AnyPeer = len(peers) == 0
			for j, peer := range peers {
				switch {
				case peer.IPBlock != nil:
					b, err := parseIPBlock(peer.IPBlock.CIDR, peer.IPBlock.Except)
					if err != nil {
						return fmt.Errorf("%s rule %d peer %d: %w", dir, i, j, err)
					}
					pr.rule.IPBlocks = append(pr.rule.IPBlocks, b)
				case peer.NamespaceSelector != nil:
					gs, err := e.clusterGroupSpec(peer.NamespaceSelector, peer.PodSelector)
					if err != nil {
						return fmt.Errorf("%s rule %d peer %d: %w", dir, i, j, err)
					}
					pr.peers = append(pr.peers, gs)
				case peer.PodSelector != nil:
					gs, err := e.nsGroupSpec(ns, peer.PodSelector)
					if err != nil {
						return fmt.Errorf("%s rule %d peer %d: %w", dir, i, j, err)
					}
					pr.peers = append(pr.peers, gs)
				default:
					return fmt.Errorf("%s rule %d peer %d: %w: a peer needs podSelector, namespaceSelector or ipBlock", dir, i, j, ErrInvalid)
				}
			}
			ports, err := convertK8sPorts(portsOf(i))
			if err != nil {
				return fmt.Errorf("%s rule %d: %w", dir, i, err)
			}
			pr.rule.Ports = ports
			if dir == Egress && pr.rule.AnyPeer && hasNamedPort(ports) {
				// A named port of an egress rule is resolved against the
				// destination pods, and "to anywhere" does not say which:
				// the node gets every pod as an address group to resolve
				// it against (the rule still matches any destination on
				// its numbered ports).
				gs, err := e.clusterGroupSpec(&metav1.LabelSelector{}, nil)
				if err != nil {
					return fmt.Errorf("%s rule %d: %w", dir, i, err)
				}
				pr.peers = append(pr.peers, gs)
			}
			pl.rules = append(pl.rules, pr)
		}
		return nil
	}
	// A rule that cannot be computed must never widen what is allowed:
	// dropping the whole policy would open the pods it isolates. So the
	// policy stays, isolating its pods in its directions with no rule
	// allowing anything (fail closed), and the error is reported.
	if pl.isoIn {
		in := np.Spec.Ingress
		if err := addRules(Ingress, len(in), func(i int) []networkingv1.NetworkPolicyPeer { return in[i].From },
			func(i int) []networkingv1.NetworkPolicyPort { return in[i].Ports }); err != nil {
			pl.rules = nil
			return pl, err
		}
	}
	if pl.isoEg {
		eg := np.Spec.Egress
		if err := addRules(Egress, len(eg), func(i int) []networkingv1.NetworkPolicyPeer { return eg[i].To },
			func(i int) []networkingv1.NetworkPolicyPort { return eg[i].Ports }); err != nil {
			pl.rules = nil
			return pl, err
		}
	}
	return pl, nil
}

func hasNamedPort(ps []Port) bool {
	for _, p := range ps {
		if p.Name != "" {
			return true
		}
	}
	return false
}

func convertK8sPorts(ps []networkingv1.NetworkPolicyPort) ([]Port, error) {
	var out []Port
	for _, p := range ps {
		port, err := convertPort(p.Protocol, p.Port, p.EndPort)
		if err != nil {
			return nil, err
		}
		out = append(out, port)
	}
	return out, nil
}

func convertPort(proto *corev1.Protocol, port *intstr.IntOrString, endPort *int32) (Port, error) {
	out := Port{Protocol: corev1.ProtocolTCP}
	if proto != nil {
		switch *proto {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
			out.Protocol = *proto
		default:
			return out, fmt.Errorf("%w: protocol %q: use TCP, UDP or SCTP", ErrInvalid, *proto)
		}
	}
	if port != nil {
		if port.Type == intstr.String {
			out.Name = port.StrVal
		} else {
			if port.IntVal < 1 || port.IntVal > 65535 {
				return out, fmt.Errorf("%w: port %d out of range 1-65535", ErrInvalid, port.IntVal)
			}
			out.Port = port.IntVal
		}
	}
	if endPort != nil {
		if port == nil || port.Type == intstr.String {
			return out, fmt.Errorf("%w: endPort %d needs a numeric port", ErrInvalid, *endPort)
		}
		if *endPort < out.Port || *endPort > 65535 {
			return out, fmt.Errorf("%w: endPort %d must be between port %d and 65535", ErrInvalid, *endPort, out.Port)
		}
		if *endPort > out.Port {
			out.EndPort = *endPort
		}
	}
	return out, nil
}

func parseIPBlock(cidr string, except []string) (IPBlock, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return IPBlock{}, fmt.Errorf("%w %q: %v", ErrInvalidCIDR, cidr, err)
	}
	b := IPBlock{CIDR: p.Masked()}
	for _, x := range except {
		xp, err := netip.ParsePrefix(x)
		if err != nil {
			return IPBlock{}, fmt.Errorf("%w: except %q: %v", ErrInvalidCIDR, x, err)
		}
		xp = xp.Masked()
		if xp.Addr().Is4() != b.CIDR.Addr().Is4() || xp.Bits() < b.CIDR.Bits() || !b.CIDR.Contains(xp.Addr()) {
			return IPBlock{}, fmt.Errorf("%w: except %q is not inside %q", ErrInvalidCIDR, x, cidr)
		}
		b.Except = append(b.Except, xp)
	}
	return b, nil
}

func (e *Engine) nsGroupSpec(ns string, podSel *metav1.LabelSelector) (groupSpec, error) {
	sel, canon, err := e.compileSelector(podSel)
	if err != nil {
		return groupSpec{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return groupSpec{key: "n:" + ns + "|" + canon, ns: e.nsIdx(ns), podSel: sel}, nil
}

// clusterGroupSpec: pods matching podSel (nil: all) in namespaces matching
// nsSel (nil: all).
func (e *Engine) clusterGroupSpec(nsSel, podSel *metav1.LabelSelector) (groupSpec, error) {
	ns, nsCanon, err := e.compileSelector(nsSel)
	if err != nil {
		return groupSpec{}, fmt.Errorf("%w: namespaceSelector: %v", ErrInvalid, err)
	}
	ps, podCanon, err := e.compileSelector(podSel)
	if err != nil {
		return groupSpec{}, fmt.Errorf("%w: podSelector: %v", ErrInvalid, err)
	}
	return groupSpec{key: "c:" + nsCanon + "|" + podCanon, ns: -1, podSel: ps, nsSel: ns}, nil
}

// install replaces the computed state of policy uid with plan (nil: the
// policy is invalid, perr says why) and emits the changes to watched nodes.
func (e *Engine) install(uid string, native bool, src *nativeSource, pl *plan, meta *Policy, perr error) error {
	polID, ok := e.policyByUID[uid]
	if !ok {
		polID = int32(len(e.policies))
		e.policies = append(e.policies, &policy{uid: uid, native: native})
		e.policyByUID[uid] = polID
	}
	rec := e.policies[polID]
	rec.src = src
	if native {
		e.dirty[uid] = struct{}{}
	}
	oldOut, oldATGs, oldEdges, oldRefs := rec.out, rec.atgs, rec.edges, rec.refs
	rec.out, rec.atgs, rec.edges, rec.refs, rec.err = nil, nil, nil, nil, perr
	if pl != nil {
		out := meta
		out.TierPriority, out.Priority = pl.tierP, pl.prio
		out.IsolateIngress, out.IsolateEgress = pl.isoIn, pl.isoEg
		acq := func(specs []groupSpec) []GroupID {
			var ids []GroupID
			for i := range specs {
				id := e.acquire(&specs[i])
				rec.refs = append(rec.refs, id)
				if !slices.Contains(ids, GroupID(id)) {
					ids = append(ids, GroupID(id))
				}
			}
			return ids
		}
		out.AppliedToGroups = acq(pl.atgs)
		for _, id := range out.AppliedToGroups {
			rec.atgs = append(rec.atgs, int32(id))
		}
		out.Rules = make([]Rule, len(pl.rules))
		for i := range pl.rules {
			pr := &pl.rules[i]
			r := pr.rule
			r.AddressGroups = acq(pr.peers)
			if pr.atgs != nil {
				r.AppliedToGroups = acq(pr.atgs)
			} else {
				r.AppliedToGroups = out.AppliedToGroups
			}
			for _, id := range r.AppliedToGroups {
				if !slices.Contains(rec.atgs, int32(id)) {
					rec.atgs = append(rec.atgs, int32(id))
				}
			}
			out.Rules[i] = r
		}
		for _, a := range rec.atgs {
			e.atgInc(e.groups[a], polID)
		}
		for _, r := range out.Rules {
			for _, a := range r.AppliedToGroups {
				for _, ag := range r.AddressGroups {
					e.edgeInc(e.groups[a], int32(ag))
					rec.edges = append(rec.edges, [2]int32{int32(a), int32(ag)})
				}
			}
		}
		rec.out = out
	}
	if e.nWatched > 0 {
		for node := range e.watch {
			if e.watch[node] == 0 {
				continue
			}
			n := int32(node)
			inOld := oldOut != nil && e.anyOnNode(oldATGs, n)
			inNew := rec.out != nil && e.anyOnNode(rec.atgs, n)
			if inNew {
				e.emit(n, Event{Type: PolicyUpsert, Policy: rec.out})
			} else if inOld {
				e.emit(n, Event{Type: PolicyDelete, PolicyUID: uid})
			}
		}
	}
	for _, ed := range oldEdges {
		e.edgeDec(e.groups[ed[0]], ed[1])
	}
	for _, a := range oldATGs {
		e.atgDec(e.groups[a], polID)
	}
	for _, id := range oldRefs {
		e.release(id)
	}
	if perr != nil {
		if pl != nil {
			e.log.Warn("policy invalid: isolating its pods with no rule allowing traffic (fail closed)", "policy", uid, "err", perr)
		} else {
			e.log.Warn("policy not computed", "policy", uid, "err", perr)
		}
	}
	return perr
}

func (e *Engine) anyOnNode(atgs []int32, node int32) bool {
	for _, a := range atgs {
		if hasNode(e.groups[a].nodes, node) {
			return true
		}
	}
	return false
}

// remove deletes a policy's computed state and its record.
func (e *Engine) remove(uid string) {
	polID, ok := e.policyByUID[uid]
	if !ok {
		return
	}
	rec := e.policies[polID]
	e.install(uid, rec.native, nil, nil, nil, nil)
	e.setDeps(polID, nil)
	if rec.native {
		e.dirty[uid] = struct{}{}
	}
	delete(e.policyByUID, uid)
	// The slot stays allocated (nil) so IDs held in ATG lists are never
	// reused for another policy.
	e.policies[polID] = &policy{uid: uid}
}

// PolicyInfo reports what the engine knows of a policy: its generation, the
// nodes in its span, and why it is not computed (err) if it is invalid.
type PolicyInfo struct {
	Generation int64
	Nodes      []string
	Err        error
}

// Policy returns the state of policy uid; ok is false for unknown policies.
func (e *Engine) Policy(uid string) (info PolicyInfo, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	polID, ok := e.policyByUID[uid]
	if !ok {
		return PolicyInfo{}, false
	}
	rec := e.policies[polID]
	info.Err = rec.err
	if rec.src != nil {
		info.Generation = rec.src.generation
	}
	if rec.out == nil {
		return info, true
	}
	info.Generation = rec.out.Generation
	var nodes []int32
	for _, a := range rec.atgs {
		for _, nc := range e.groups[a].nodes {
			if !slices.Contains(nodes, nc.node) {
				nodes = append(nodes, nc.node)
			}
		}
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		info.Nodes = append(info.Nodes, e.nodeNames[n])
	}
	return info, true
}

// ComputedPolicy returns the published internal policy, or nil.
func (e *Engine) ComputedPolicy(uid string) *Policy {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id, ok := e.policyByUID[uid]; ok {
		return e.policies[id].out
	}
	return nil
}

// DrainDirty returns the native policies whose validity or span changed
// since the last call, for the status writer.
func (e *Engine) DrainDirty() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.dirty))
	for uid := range e.dirty {
		out = append(out, uid)
	}
	clear(e.dirty)
	slices.Sort(out)
	return out
}

// Stats counts the computed objects.
type Stats struct {
	Pods, Groups, AppliedToGroups, AddressGroups, Policies, InvalidPolicies int
}

// Stats returns object counts; groups used both ways count in both.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Stats{Pods: len(e.podByKey)}
	for _, g := range e.groups {
		if g == nil {
			continue
		}
		s.Groups++
		if g.atgRefs > 0 {
			s.AppliedToGroups++
		}
		if g.atgRefs == 0 || len(g.agSpan) > 0 {
			// A group acquired only as a peer is an AG even before any node needs it.
			s.AddressGroups++
		}
	}
	for _, uid := range e.policyByUID {
		if e.policies[uid].out != nil {
			s.Policies++
		} else {
			s.InvalidPolicies++
		}
	}
	return s
}

// Watch marks node as watched and calls fn, with the engine locked, with the
// node's snapshot; events for the node go to the sink from then on, so a
// caller can record its log position inside fn without missing or doubling
// an event. Each Watch needs one Unwatch.
func (e *Engine) Watch(node string, fn func(NodeSnapshot)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.nodeIdx(node)
	e.watch[n]++
	e.nWatched++
	fn(e.snapshot(n))
}

// Unwatch ends one Watch of node.
func (e *Engine) Unwatch(node string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n, ok := e.nodeIDs[node]; ok && e.watch[n] > 0 {
		e.watch[n]--
		e.nWatched--
	}
}

// SnapshotFunc calls fn with node's snapshot while the engine is locked, so
// fn can record the position of the event stream the snapshot is consistent
// with. It does not change whether node is watched.
func (e *Engine) SnapshotFunc(node string, fn func(NodeSnapshot)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fn(e.snapshot(e.nodeIdx(node)))
}

// Snapshot returns what node needs, without watching it.
func (e *Engine) Snapshot(node string) NodeSnapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.snapshot(e.nodeIdx(node))
}

// snapshot walks only the groups with pods on n: the ATGs among them, the
// AGs their rules use (exactly the AG span) and the policies applied to them.
func (e *Engine) snapshot(n int32) NodeSnapshot {
	var s NodeSnapshot
	e.stamp++
	var ags []int32
	var pols []int32
	for _, gid := range e.nodeGroups[n] {
		g := e.groups[gid]
		if g.atgRefs == 0 {
			continue
		}
		s.AppliedToGroups = append(s.AppliedToGroups, GroupState{ID: g.id, Members: e.members(g, n)})
		for _, ed := range g.edges {
			if ag := e.groups[ed.ag]; ag.stamp != e.stamp {
				ag.stamp = e.stamp
				ags = append(ags, ed.ag)
			}
		}
		pols = append(pols, g.atgPolicies...)
	}
	slices.Sort(ags)
	for _, id := range ags {
		s.AddressGroups = append(s.AddressGroups, GroupState{ID: GroupID(id), Members: e.members(e.groups[id], -1)})
	}
	slices.Sort(pols)
	for _, id := range slices.Compact(pols) {
		s.Policies = append(s.Policies, e.policies[id].out)
	}
	slices.SortFunc(s.AppliedToGroups, func(a, b GroupState) int { return int(a.ID) - int(b.ID) })
	slices.SortFunc(s.Policies, func(a, b *Policy) int { return strings.Compare(a.UID, b.UID) })
	return s
}
