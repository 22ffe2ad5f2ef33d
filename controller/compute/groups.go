package compute

import (
	"slices"
)

// groupSpec is a normalized selector: pods of namespace ns (ns >= 0), or of
// every namespace matching nsSel (ns < 0), that match podSel. key is its
// canonical text; equal keys share one group.
type groupSpec struct {
	key    string
	ns     int32
	podSel selector
	nsSel  selector
}

type nodeCount struct {
	node int32
	n    int32
}

type edge struct {
	ag int32
	n  int32
}

type group struct {
	id     GroupID
	key    string
	ns     int32
	podSel selector
	nsSel  selector
	podKV  uint32
	nsKV   uint32
	stamp  uint32
	refs   int32

	members []int32     // sorted pod IDs
	nodes   []nodeCount // pods per node, sorted by node: the ATG span

	// As an ATG: the policies applying to it and, per AG used by a rule
	// applied to it, how many rules do so.
	atgRefs     int32
	atgPolicies []int32
	edges       []edge
	// As an AG: for each node, how many (ATG, AG) edges put the node in
	// this group's span.
	agSpan []nodeCount
}

func searchNC(ncs []nodeCount, node int32) (int, bool) {
	return slices.BinarySearchFunc(ncs, node, func(nc nodeCount, n int32) int { return int(nc.node) - int(n) })
}

func hasNode(ncs []nodeCount, node int32) bool {
	_, ok := searchNC(ncs, node)
	return ok
}

// acquire returns the group for spec, creating it and computing its members
// when it is new.
func (e *Engine) acquire(spec *groupSpec) int32 {
	if id, ok := e.groupByKey[spec.key]; ok {
		e.groups[id].refs++
		return id
	}
	id := int32(len(e.groups))
	g := &group{id: GroupID(id), key: spec.key, ns: spec.ns, podSel: spec.podSel, nsSel: spec.nsSel, refs: 1}
	g.podKV = e.indexKV(&g.podSel)
	if g.ns >= 0 {
		k := uint64(g.ns)<<32 | uint64(g.podKV)
		e.nsGroups[k] = append(e.nsGroups[k], id)
	} else {
		g.nsKV = e.indexKV(&g.nsSel)
		k := uint64(g.podKV)<<32 | uint64(g.nsKV)
		e.clGroups[k] = append(e.clGroups[k], id)
	}
	e.groups = append(e.groups, g)
	e.groupByKey[spec.key] = id
	e.computeMembers(g)
	return id
}

// computeMembers fills a new group from the narrowest pod index its
// selectors allow.
func (e *Engine) computeMembers(g *group) {
	consider := func(pids []int32) {
		for _, pid := range pids {
			if e.matches(g, e.pod(pid)) {
				g.members = append(g.members, pid)
			}
		}
	}
	// For a cluster group with both index keys, walk whichever is smaller:
	// every pod carrying the pod key, or the pods carrying it (or all pods,
	// without one) in the namespaces carrying the namespace key.
	byNs := -1
	if g.ns < 0 && g.nsKV != 0 {
		byNs = 0
		for _, ns := range e.nsByKV[g.nsKV] {
			byNs += len(e.podsByNsKV[uint64(ns)<<32|uint64(g.podKV)])
		}
	}
	switch {
	case g.ns >= 0:
		consider(e.podsByNsKV[uint64(g.ns)<<32|uint64(g.podKV)])
	case byNs >= 0 && (g.podKV == 0 || byNs < len(e.podsByKV[g.podKV])):
		for _, ns := range e.nsByKV[g.nsKV] {
			consider(e.podsByNsKV[uint64(ns)<<32|uint64(g.podKV)])
		}
	case g.podKV != 0:
		consider(e.podsByKV[g.podKV])
	default:
		for pid := range int32(e.nPods) {
			if p := e.pod(pid); p.live && e.matches(g, p) {
				g.members = append(g.members, int32(pid))
			}
		}
	}
	slices.Sort(g.members)
	for _, pid := range g.members {
		node := e.pod(pid).node
		if i, ok := searchNC(g.nodes, node); ok {
			g.nodes[i].n++
		} else {
			g.nodes = slices.Insert(g.nodes, i, nodeCount{node, 1})
			e.nodeGroups[node] = append(e.nodeGroups[node], int32(g.id))
		}
	}
}

func (e *Engine) release(id int32) {
	g := e.groups[id]
	g.refs--
	if g.refs > 0 {
		return
	}
	if g.ns >= 0 {
		k := uint64(g.ns)<<32 | uint64(g.podKV)
		e.nsGroups[k] = removeID(e.nsGroups[k], id)
		if len(e.nsGroups[k]) == 0 {
			delete(e.nsGroups, k)
		}
	} else {
		k := uint64(g.podKV)<<32 | uint64(g.nsKV)
		e.clGroups[k] = removeID(e.clGroups[k], id)
		if len(e.clGroups[k]) == 0 {
			delete(e.clGroups, k)
		}
	}
	for _, nc := range g.nodes {
		e.nodeGroups[nc.node] = removeID(e.nodeGroups[nc.node], id)
	}
	delete(e.groupByKey, g.key)
	e.groups[id] = nil
}

func (e *Engine) addMember(g *group, pid int32) {
	i, found := slices.BinarySearch(g.members, pid)
	if found {
		return
	}
	g.members = slices.Insert(g.members, i, pid)
	p := e.pod(pid)
	if e.nWatched > 0 && len(g.agSpan) > 0 {
		m := []Member{e.member(p)}
		for _, nc := range g.agSpan {
			e.emit(nc.node, Event{Type: AddressGroupPatch, Group: g.id, Added: m})
		}
	}
	e.nodeInc(g, p.node, p)
}

func (e *Engine) removeMember(g *group, pid int32) {
	i, found := slices.BinarySearch(g.members, pid)
	if !found {
		return
	}
	g.members = slices.Delete(g.members, i, i+1)
	p := e.pod(pid)
	if e.nWatched > 0 && len(g.agSpan) > 0 {
		m := []Member{e.member(p)}
		for _, nc := range g.agSpan {
			e.emit(nc.node, Event{Type: AddressGroupPatch, Group: g.id, Removed: m})
		}
	}
	e.nodeDec(g, p.node, p)
}

func (e *Engine) nodeInc(g *group, node int32, p *pod) {
	i, found := searchNC(g.nodes, node)
	if found {
		g.nodes[i].n++
		if g.atgRefs > 0 && e.watched(node) {
			e.emit(node, Event{Type: AppliedToGroupPatch, Group: g.id, Added: []Member{e.member(p)}})
		}
		return
	}
	g.nodes = slices.Insert(g.nodes, i, nodeCount{node, 1})
	e.nodeGroups[node] = append(e.nodeGroups[node], int32(g.id))
	if g.atgRefs == 0 {
		return
	}
	if e.watched(node) {
		e.emit(node, Event{Type: AppliedToGroupUpsert, Group: g.id, Added: []Member{e.member(p)}})
	}
	for _, ed := range g.edges {
		e.agSpanInc(e.groups[ed.ag], node)
	}
	for _, polID := range g.atgPolicies {
		pol := e.policies[polID]
		if pol.native {
			e.dirty[pol.uid] = struct{}{}
		}
		if e.watched(node) && e.policyNodeATGs(pol, node) == 1 {
			e.emit(node, Event{Type: PolicyUpsert, Policy: pol.out})
		}
	}
}

func (e *Engine) nodeDec(g *group, node int32, p *pod) {
	i, found := searchNC(g.nodes, node)
	if !found {
		return
	}
	g.nodes[i].n--
	if g.nodes[i].n > 0 {
		if g.atgRefs > 0 && e.watched(node) {
			e.emit(node, Event{Type: AppliedToGroupPatch, Group: g.id, Removed: []Member{e.member(p)}})
		}
		return
	}
	g.nodes = slices.Delete(g.nodes, i, i+1)
	e.nodeGroups[node] = removeID(e.nodeGroups[node], int32(g.id))
	if g.atgRefs == 0 {
		return
	}
	for _, polID := range g.atgPolicies {
		pol := e.policies[polID]
		if pol.native {
			e.dirty[pol.uid] = struct{}{}
		}
		if e.watched(node) && e.policyNodeATGs(pol, node) == 0 {
			e.emit(node, Event{Type: PolicyDelete, PolicyUID: pol.uid})
		}
	}
	for _, ed := range g.edges {
		e.agSpanDec(e.groups[ed.ag], node)
	}
	if e.watched(node) {
		e.emit(node, Event{Type: AppliedToGroupDelete, Group: g.id})
	}
}

// policyNodeATGs counts the policy's ATGs that have pods on node.
func (e *Engine) policyNodeATGs(pol *policy, node int32) int {
	n := 0
	for _, a := range pol.atgs {
		if hasNode(e.groups[a].nodes, node) {
			n++
		}
	}
	return n
}

func (e *Engine) agSpanInc(ag *group, node int32) {
	i, found := searchNC(ag.agSpan, node)
	if found {
		ag.agSpan[i].n++
		return
	}
	ag.agSpan = slices.Insert(ag.agSpan, i, nodeCount{node, 1})
	if e.watched(node) {
		e.emit(node, Event{Type: AddressGroupUpsert, Group: ag.id, Added: e.members(ag, -1)})
	}
}

func (e *Engine) agSpanDec(ag *group, node int32) {
	i, found := searchNC(ag.agSpan, node)
	if !found {
		return
	}
	ag.agSpan[i].n--
	if ag.agSpan[i].n > 0 {
		return
	}
	ag.agSpan = slices.Delete(ag.agSpan, i, i+1)
	if e.watched(node) {
		e.emit(node, Event{Type: AddressGroupDelete, Group: ag.id})
	}
}

// members lists a group's members, only those on node when node >= 0.
func (e *Engine) members(g *group, node int32) []Member {
	var out []Member
	for _, pid := range g.members {
		p := e.pod(pid)
		if node < 0 || p.node == node {
			out = append(out, e.member(p))
		}
	}
	return out
}

func (e *Engine) atgInc(g *group, polID int32) {
	g.atgRefs++
	g.atgPolicies = append(g.atgPolicies, polID)
	if g.atgRefs == 1 && e.nWatched > 0 {
		for _, nc := range g.nodes {
			if e.watched(nc.node) {
				e.emit(nc.node, Event{Type: AppliedToGroupUpsert, Group: g.id, Added: e.members(g, nc.node)})
			}
		}
	}
}

func (e *Engine) atgDec(g *group, polID int32) {
	g.atgRefs--
	g.atgPolicies = removeID(g.atgPolicies, polID)
	if g.atgRefs == 0 && e.nWatched > 0 {
		for _, nc := range g.nodes {
			e.emit(nc.node, Event{Type: AppliedToGroupDelete, Group: g.id})
		}
	}
}

func (e *Engine) edgeInc(atg *group, agID int32) {
	for i := range atg.edges {
		if atg.edges[i].ag == agID {
			atg.edges[i].n++
			return
		}
	}
	atg.edges = append(atg.edges, edge{agID, 1})
	ag := e.groups[agID]
	for _, nc := range atg.nodes {
		e.agSpanInc(ag, nc.node)
	}
}

func (e *Engine) edgeDec(atg *group, agID int32) {
	for i := range atg.edges {
		if atg.edges[i].ag != agID {
			continue
		}
		atg.edges[i].n--
		if atg.edges[i].n == 0 {
			atg.edges = slices.Delete(atg.edges, i, i+1)
			ag := e.groups[agID]
			for _, nc := range atg.nodes {
				e.agSpanDec(ag, nc.node)
			}
		}
		return
	}
}
