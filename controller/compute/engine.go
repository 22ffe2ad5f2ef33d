package compute

import (
	"log/slog"
	"net/netip"
	"slices"
	"sync"
)

// Engine holds the computed state. All methods are safe for concurrent use;
// they serialize on one mutex because every input can touch shared groups.
type Engine struct {
	mu   sync.Mutex
	log  *slog.Logger
	sink Sink

	strs interner
	kvs  map[uint64]uint32

	nodeIDs   map[string]int32
	nodeNames []string
	watch     []int32 // watch count per node
	// nodeGroups lists, per node, the groups with pods on it, so a node's
	// snapshot costs its span rather than the whole state.
	nodeGroups [][]int32
	nWatched   int

	nss      []*namespace
	nsByName map[string]int32
	nsByKV   map[uint32][]int32

	// Pods live in fixed-size chunks so growing never copies them.
	podChunks [][]pod
	nPods     int
	podFree   []int32
	podByKey  map[podKey]int32
	// podsByNsKV: key ns<<32|kv lists the pods of ns carrying kv; kv 0 lists
	// every pod of ns. podsByKV lists every pod carrying kv cluster-wide.
	podsByNsKV map[uint64][]int32
	podsByKV   map[uint32][]int32

	groups     []*group
	groupByKey map[string]int32
	// nsGroups: key ns<<32|podKV, the namespaced groups of ns whose pod
	// selector requires podKV (0: no equality requirement). clGroups: key
	// podKV<<32|nsKV for cluster-wide groups, likewise.
	nsGroups map[uint64][]int32
	clGroups map[uint64][]int32
	stamp    uint32
	// evals counts selector evaluations against pods, so tests can check
	// that an incremental change looks at few groups.
	evals  int
	cand   []int32
	addBuf []int32

	policies    []*policy
	policyByUID map[string]int32
	tiers       map[string]int32
	cgroups     map[string]*groupDef // ClusterGroups by name
	ngroups     map[string]*groupDef // Groups by namespace/name
	dependents  map[string]map[int32]struct{}
	dirty       map[string]struct{}
	dirtyGroups map[GroupRef]struct{}
}

type namespace struct {
	name   string
	labels labelSet
}

type podKey struct {
	ns   int32
	name string
}

type pod struct {
	live   bool
	ns     int32
	node   int32
	name   string
	ips    []netip.Addr
	labels labelSet
	ports  []NamedPort
}

// New returns an empty engine. sink may be nil until SetSink is called.
func New(log *slog.Logger) *Engine {
	if log == nil {
		log = slog.Default()
	}
	return &Engine{
		log:         log,
		strs:        newInterner(),
		kvs:         map[uint64]uint32{},
		nodeIDs:     map[string]int32{},
		nsByName:    map[string]int32{},
		nsByKV:      map[uint32][]int32{},
		podByKey:    map[podKey]int32{},
		podsByNsKV:  map[uint64][]int32{},
		podsByKV:    map[uint32][]int32{},
		groupByKey:  map[string]int32{},
		nsGroups:    map[uint64][]int32{},
		clGroups:    map[uint64][]int32{},
		policyByUID: map[string]int32{},
		tiers:       map[string]int32{},
		cgroups:     map[string]*groupDef{},
		ngroups:     map[string]*groupDef{},
		dependents:  map[string]map[int32]struct{}{},
		dirty:       map[string]struct{}{},
		dirtyGroups: map[GroupRef]struct{}{},
	}
}

// SetSink sets where events for watched nodes go.
func (e *Engine) SetSink(s Sink) {
	e.mu.Lock()
	e.sink = s
	e.mu.Unlock()
}

func (e *Engine) nodeIdx(name string) int32 {
	if id, ok := e.nodeIDs[name]; ok {
		return id
	}
	id := int32(len(e.nodeNames))
	e.nodeNames = append(e.nodeNames, name)
	e.watch = append(e.watch, 0)
	e.nodeGroups = append(e.nodeGroups, nil)
	e.nodeIDs[name] = id
	return id
}

func (e *Engine) watched(node int32) bool { return e.watch[node] > 0 }

func (e *Engine) emit(node int32, ev Event) {
	if e.watch[node] > 0 && e.sink != nil {
		e.sink.Emit(e.nodeNames[node], ev)
	}
}

func (e *Engine) nsIdx(name string) int32 {
	if id, ok := e.nsByName[name]; ok {
		return id
	}
	id := int32(len(e.nss))
	e.nss = append(e.nss, &namespace{name: name})
	e.nsByName[name] = id
	return id
}

func (e *Engine) member(p *pod) Member {
	return Member{Namespace: e.nss[p.ns].name, Name: p.name, Node: e.nodeNames[p.node], IPs: p.ips, Ports: p.ports}
}

// UpsertPod adds or updates a pod. Callers pass only pods that are scheduled
// and have an IP (see PodFromKubernetes); others should be deleted.
func (e *Engine) UpsertPod(in Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ns := e.nsIdx(in.Namespace)
	key := podKey{ns, in.Name}
	np := pod{live: true, ns: ns, node: e.nodeIdx(in.Node), name: in.Name, ips: in.IPs, labels: e.internLabels(in.Labels), ports: in.Ports}
	nsl := e.nss[ns].labels
	pid, ok := e.podByKey[key]
	if !ok {
		pid = e.allocPod()
		e.podByKey[key] = pid
		*e.pod(pid) = np
		e.indexPod(pid)
		e.beginCand()
		e.addNsCand(ns, np.labels)
		e.addClusterCand(np.labels, nsl)
		for _, gid := range e.cand {
			if g := e.groups[gid]; e.matches(g, e.pod(pid)) {
				e.addMember(g, pid)
			}
		}
		return
	}
	p := e.pod(pid)
	sameLabels := p.labels.equal(np.labels)
	sameRest := p.node == np.node && slices.Equal(p.ips, np.ips) && slices.Equal(p.ports, np.ports)
	if sameLabels && sameRest {
		return
	}
	e.beginCand()
	e.addNsCand(ns, p.labels)
	e.addClusterCand(p.labels, nsl)
	if !sameLabels {
		e.addNsCand(ns, np.labels)
		e.addClusterCand(np.labels, nsl)
	}
	e.addBuf = e.addBuf[:0]
	for _, gid := range e.cand {
		g := e.groups[gid]
		_, was := slices.BinarySearch(g.members, pid)
		now := e.matches(g, &np)
		if was && (!now || !sameRest) {
			e.removeMember(g, pid)
		}
		if now && (!was || !sameRest) {
			e.addBuf = append(e.addBuf, gid)
		}
	}
	if !sameLabels {
		e.unindexPod(pid)
	}
	*p = np
	if !sameLabels {
		e.indexPod(pid)
	}
	for _, gid := range e.addBuf {
		e.addMember(e.groups[gid], pid)
	}
}

// DeletePod removes a pod; unknown pods are ignored.
func (e *Engine) DeletePod(namespace, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ns, ok := e.nsByName[namespace]
	if !ok {
		return
	}
	pid, ok := e.podByKey[podKey{ns, name}]
	if !ok {
		return
	}
	p := e.pod(pid)
	e.beginCand()
	e.addNsCand(ns, p.labels)
	e.addClusterCand(p.labels, e.nss[ns].labels)
	for _, gid := range e.cand {
		e.removeMember(e.groups[gid], pid)
	}
	e.unindexPod(pid)
	delete(e.podByKey, podKey{ns, name})
	*e.pod(pid) = pod{}
	e.podFree = append(e.podFree, pid)
}

// UpsertNamespace sets a namespace's labels. Only cluster-wide groups can
// change, and only those indexed under the old or new labels are examined.
func (e *Engine) UpsertNamespace(name string, labels map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ns := e.nsIdx(name)
	rec := e.nss[ns]
	nl := e.internLabels(labels)
	if rec.labels.equal(nl) {
		return
	}
	old := rec.labels
	for _, l := range old {
		e.nsByKV[l.kv] = removeID(e.nsByKV[l.kv], ns)
	}
	rec.labels = nl
	for _, l := range nl {
		e.nsByKV[l.kv] = append(e.nsByKV[l.kv], ns)
	}
	pods := slices.Clone(e.podsByNsKV[uint64(ns)<<32])
	for _, pid := range pods {
		p := e.pod(pid)
		e.beginCand()
		e.addClusterCand(p.labels, old)
		e.addClusterCand(p.labels, nl)
		e.addBuf = e.addBuf[:0]
		for _, gid := range e.cand {
			g := e.groups[gid]
			_, was := slices.BinarySearch(g.members, pid)
			now := e.matches(g, p)
			if was && !now {
				e.removeMember(g, pid)
			} else if now && !was {
				e.addBuf = append(e.addBuf, gid)
			}
		}
		for _, gid := range e.addBuf {
			e.addMember(e.groups[gid], pid)
		}
	}
}

// DeleteNamespace forgets a namespace's labels. Its pods are deleted by their
// own events.
func (e *Engine) DeleteNamespace(name string) { e.UpsertNamespace(name, nil) }

func (e *Engine) allocPod() int32 {
	if n := len(e.podFree); n > 0 {
		id := e.podFree[n-1]
		e.podFree = e.podFree[:n-1]
		return id
	}
	if e.nPods%podChunk == 0 {
		e.podChunks = append(e.podChunks, make([]pod, podChunk))
	}
	e.nPods++
	return int32(e.nPods - 1)
}

const podChunk = 4096

func (e *Engine) pod(pid int32) *pod { return &e.podChunks[pid/podChunk][pid%podChunk] }

func (e *Engine) indexPod(pid int32) {
	p := e.pod(pid)
	base := uint64(p.ns) << 32
	e.podsByNsKV[base] = append(e.podsByNsKV[base], pid)
	for _, l := range p.labels {
		e.podsByNsKV[base|uint64(l.kv)] = append(e.podsByNsKV[base|uint64(l.kv)], pid)
		e.podsByKV[l.kv] = append(e.podsByKV[l.kv], pid)
	}
}

func (e *Engine) unindexPod(pid int32) {
	p := e.pod(pid)
	base := uint64(p.ns) << 32
	e.podsByNsKV[base] = removeID(e.podsByNsKV[base], pid)
	for _, l := range p.labels {
		e.podsByNsKV[base|uint64(l.kv)] = removeID(e.podsByNsKV[base|uint64(l.kv)], pid)
		e.podsByKV[l.kv] = removeID(e.podsByKV[l.kv], pid)
	}
}

// removeID removes one occurrence of id from an unordered list.
func removeID(ids []int32, id int32) []int32 {
	for i, x := range ids {
		if x == id {
			ids[i] = ids[len(ids)-1]
			return ids[:len(ids)-1]
		}
	}
	return ids
}

// Candidate groups for a pod are collected into e.cand, deduplicated by
// stamping each group with the current collection number.
func (e *Engine) beginCand() {
	e.stamp++
	e.cand = e.cand[:0]
}

func (e *Engine) visit(ids []int32) {
	for _, id := range ids {
		if g := e.groups[id]; g.stamp != e.stamp {
			g.stamp = e.stamp
			e.cand = append(e.cand, id)
		}
	}
}

func (e *Engine) addNsCand(ns int32, ls labelSet) {
	base := uint64(ns) << 32
	e.visit(e.nsGroups[base])
	for _, l := range ls {
		e.visit(e.nsGroups[base|uint64(l.kv)])
	}
}

func (e *Engine) addClusterCand(pls, nsl labelSet) {
	if len(e.clGroups) == 0 {
		return
	}
	for i := -1; i < len(pls); i++ {
		var pk uint64
		if i >= 0 {
			pk = uint64(pls[i].kv) << 32
		}
		e.visit(e.clGroups[pk])
		for _, nl := range nsl {
			e.visit(e.clGroups[pk|uint64(nl.kv)])
		}
	}
}

func (e *Engine) matches(g *group, p *pod) bool {
	e.evals++
	if g.ns >= 0 {
		if p.ns != g.ns {
			return false
		}
	} else if !g.nsSel.matches(e.nss[p.ns].labels) {
		return false
	}
	return g.podSel.matches(p.labels)
}
