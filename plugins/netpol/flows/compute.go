package flows

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	apiv1 "switchyard.dev/switchyard/controller/api/v1"
	"switchyard.dev/switchyard/controller/client"
	"switchyard.dev/switchyard/sdk"
	"switchyard.dev/switchyard/sdk/flow"
)

// Table names. They are global on the node, hence the prefix.
const (
	CTState = "netpol.ct_state"
	// CTFlags keeps what netpol's own conntrack lookup said in netpol's
	// registers (CTReply, CTRelated, CTNew), see there.
	CTFlags          = "netpol.ct_flags"
	EgressNative     = "netpol.egress_native"
	EgressRules      = "netpol.egress_rules"
	EgressIsolation  = "netpol.egress_isolation"
	EgressBaseline   = "netpol.egress_baseline"
	IngressNative    = "netpol.ingress_native"
	IngressRules     = "netpol.ingress_rules"
	IngressIsolation = "netpol.ingress_isolation"
	IngressBaseline  = "netpol.ingress_baseline"
	CTCommit         = "netpol.ct_commit"
	// RejectResume is where netpol's own reject replies enter the pipeline
	// (PreRouting), to be routed to the client like any packet.
	RejectResume = "netpol.reject_resume"
	// SCTPReplies holds the learned flows that let replies of allowed SCTP
	// associations pass (see staticFlows).
	SCTPReplies = "netpol.sctp_replies"
)

// podnetOutput is the table every forwarded packet leaves the pipeline
// from (podnet's).
const podnetOutput = "podnet.output"

// sctpReplyIdle is how long (seconds) an idle SCTP association's replies
// keep passing.
const sctpReplyIdle = 60

func ethType(v flow.IPVersion) uint16 {
	if v == flow.V6 {
		return flow.EthTypeIPv6
	}
	return flow.EthTypeIPv4
}

// Bypass marks packets netpol injects itself (reject replies): its
// security tables let them through.
var Bypass = flow.Field{Name: "netpol.bypass", Width: 1}

// Epoch is loaded into every IP packet just before netpol's conntrack
// lookup, so it is part of the state the datapath resumes after that
// lookup (its recirculation context). The plugin moves it to a new value
// whenever the rule flows change. Every packet then resumes in a context
// no cached datapath flow knows, and its verdict is computed afresh from
// the current tables.
//
// Why: ovs-vswitchd's userspace datapath before 3.1.3 (Debian 12 ships
// 3.1.0) may update the wrong cached flow when revalidation changes a
// cached flow's actions and another cached flow overlaps it (upstream
// commit "dpif-netdev: Fix dpif_netdev_flow_put"). The right one then
// keeps its old verdict for as long as packets keep hitting it, e.g. the
// drop of a connection that the policy no longer denies. Moving the epoch
// makes the old cached flows unreachable instead of relying on their
// revalidation. The cost is one datapath upcall per cached flow after a
// policy change, which revalidation would have spent anyway.
var Epoch = flow.Field{Name: "netpol.epoch", Width: 16}

// CTReply, CTRelated and CTNew hold what netpol's conntrack lookup said
// about the packet: a reply of a tracked connection, a related packet, a
// new connection. The security and commit tables match them rather than
// ct_state, because ct_state is whatever the last lookup in any zone
// said: another plugin that tracks connections in its own zone after
// netpol (the service plugin un-NATs replies, for one) would otherwise
// make every packet new to netpol, and replies to isolated pods would
// drop.
var (
	CTReply   = flow.Field{Name: "netpol.ct_reply", Width: 1}
	CTRelated = flow.Field{Name: "netpol.ct_related", Width: 1}
	CTNew     = flow.Field{Name: "netpol.ct_new", Width: 1}
)

// serviceConntrack is the first table of the service plugin's conntrack
// (its un-SNAT of hairpin replies, then the un-DNAT of Service replies).
// netpol's lookup comes before it, so it sees every packet as the pods
// sent it: a reply carries the backend's address, as netpol committed
// the connection (after the service's DNAT). A node without the service
// plugin simply has no such table.
const serviceConntrack = "service.unsnat"

// CTZoneResource is the name of netpol's conntrack zone grant.
const CTZoneResource = "netpol.zone"

// Tables declares netpol's tables. Each security stage holds four tables
// that run in this order; a packet no flow matches goes on to the next, so
// a pod no policy selects is not touched.
func Tables() []sdk.Table {
	t := func(name string, st flow.Stage, after ...string) sdk.Table {
		return sdk.Table{Name: name, Pipeline: flow.PipelineIP, Stage: st, Miss: sdk.MissNext, After: after}
	}
	return []sdk.Table{
		{Name: CTState, Pipeline: flow.PipelineIP, Stage: flow.StageConntrackState, Miss: sdk.MissNext, Before: []string{serviceConntrack}},
		{Name: CTFlags, Pipeline: flow.PipelineIP, Stage: flow.StageConntrackState, Miss: sdk.MissNext, After: []string{CTState},
			Before: []string{serviceConntrack}},
		t(RejectResume, flow.StagePreRouting),
		// Only ever resubmitted to, never walked into: it sits after the
		// output table, which every packet leaves the pipeline from.
		{Name: SCTPReplies, Pipeline: flow.PipelineIP, Stage: flow.StageOutput, Miss: sdk.MissDrop, After: []string{podnetOutput}},
		t(EgressNative, flow.StageEgressSecurity),
		t(EgressRules, flow.StageEgressSecurity, EgressNative),
		t(EgressIsolation, flow.StageEgressSecurity, EgressRules),
		t(EgressBaseline, flow.StageEgressSecurity, EgressIsolation),
		t(IngressNative, flow.StageIngressSecurity),
		t(IngressRules, flow.StageIngressSecurity, IngressNative),
		t(IngressIsolation, flow.StageIngressSecurity, IngressRules),
		t(IngressBaseline, flow.StageIngressSecurity, IngressIsolation),
		t(CTCommit, flow.StageConntrack),
	}
}

// Priorities.
const (
	prioBypass     = 65100 // netpol's own reject replies
	prioConnState  = 65000 // replies and related packets of tracked connections
	prioNode       = 64900 // the node's own traffic to its pods
	prioNativeTop  = 60000 // the first native rule; later ones count down
	prioNativeLow  = 1000  // no native rule goes below this
	prioK8sDirect  = 210   // a Kubernetes rule of one dimension (plain flows)
	prioK8sConj    = 200   // Kubernetes conjunctions
	prioIsolation  = 100
	prioStatic     = 100
	kubernetesTier = 251 // controller/compute.KubernetesTierPriority
)

// SourceKubernetes is the source_kind of a policy computed from a
// Kubernetes NetworkPolicy.
const SourceKubernetes = "K8sNetworkPolicy"

// Node is what the flows need to know about the node.
type Node struct {
	// Trusted are the node's own addresses (its gateway and node IPs):
	// traffic from them that enters through the gateway port reaches the
	// node's pods whatever the policies say, as kubelet's probes need.
	Trusted []netip.Addr
	// CTZone is the conntrack zone netpol was granted.
	CTZone uint16
	// RejectMeter, if not 0, is the meter (local ID) Reject and logging
	// packet-ins pass through, so a flood cannot swamp the agent.
	RejectMeter uint32
	// Epoch is the value of the Epoch field (see there).
	Epoch uint16
}

// Direction of a rule.
type Direction uint8

const (
	Ingress Direction = iota
	Egress
)

func (d Direction) String() string {
	if d == Egress {
		return "egress"
	}
	return "ingress"
}

// Rule describes one rule of the span as installed, for counters and
// logging: every flow that decides for the rule carries Tag.
type Rule struct {
	Tag       uint32
	PolicyUID string
	Policy    string // namespace/name, or name for a cluster-scoped policy
	Name      string
	Direction Direction
	Action    string // Allow, Drop, Reject, Pass
	Logging   bool
	Priority  uint16 // the rule's OpenFlow priority
	Conjs     []uint32
}

// Result is the flow set for a span.
type Result struct {
	// Flows are sorted by table, priority (descending) and match.
	Flows []flow.Flow
	// Keys[i] is Flows[i].Key(), computed once.
	Keys []flow.Key
	// Rules lists every rule that got flows, by tag.
	Rules map[uint32]*Rule
	// Unplaced counts, by policy UID, native rules that found no priority
	// (more than prioNativeTop-prioNativeLow in one table): they are not
	// enforced, so their policies are not realized.
	Unplaced map[string]int
}

// Userdata prefixes of netpol's packet-ins.
const (
	UserdataReject byte = 'R'
	UserdataLog    byte = 'L'
)

// Userdata is what a packet-in of rule tag carries: the kind, the tag and
// the direction, so the plugin knows the rule without a lookup by cookie.
func Userdata(kind byte, tag uint32, d Direction) []byte {
	return []byte{kind, byte(d), byte(tag >> 24), byte(tag >> 16), byte(tag >> 8), byte(tag)}
}

// ParseUserdata is the inverse of Userdata.
func ParseUserdata(b []byte) (kind byte, tag uint32, d Direction, err error) {
	if len(b) != 6 || (b[0] != UserdataReject && b[0] != UserdataLog) || b[1] > 1 {
		return 0, 0, 0, fmt.Errorf("netpol packet-in userdata %x is not kind+direction+tag", b)
	}
	return b[0], uint32(b[2])<<24 | uint32(b[3])<<16 | uint32(b[4])<<8 | uint32(b[5]), Direction(b[1]), nil
}

// svc is one protocol/port clause: port and mask 0 mean every port.
type svc struct {
	proto      uint8
	port, mask uint16
}

// conj is one conjunction to build: nil dimension = any.
type conj struct {
	key      string
	src, dst []netip.Prefix
	svcs     []svc
	anySvc   bool
	rule     *Rule
	table    string
	priority uint16
	direct   uint16 // priority of plain flows when the conjunction has one dimension
	actions  []flow.Action
	jump     flow.Jump
}

// builder accumulates flows by key, merging the conjunction actions of
// clause flows that several conjunctions share.
type builder struct {
	flows map[flow.Key]*flow.Flow
	order []flow.Key
}

func (b *builder) add(f flow.Flow) {
	k := f.Key()
	if cur, ok := b.flows[k]; ok {
		// Only clause flows meet here (plain flows of rules with the same
		// outcome at the same priority are the same flow).
		cur.Actions = append(cur.Actions, f.Actions...)
		return
	}
	b.flows[k] = &f
	b.order = append(b.order, k)
}

// Compute returns the flows that enforce span s on node n.
func Compute(s *client.State, n Node) Result {
	b := &builder{flows: map[flow.Key]*flow.Flow{}}
	res := Result{Rules: map[uint32]*Rule{}, Unplaced: map[string]int{}}
	staticFlows(b, n)

	policies := make([]*apiv1.Policy, 0, len(s.Policies))
	for _, p := range s.Policies {
		policies = append(policies, p)
	}
	slices.SortFunc(policies, func(a, b *apiv1.Policy) int {
		return cmp.Or(cmp.Compare(a.TierPriority, b.TierPriority), cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Uid, b.Uid))
	})

	var conjs []*conj
	isolated := map[Direction]map[netip.Prefix]bool{Ingress: {}, Egress: {}}
	// Native rules get descending priorities in evaluation order, per
	// direction and table.
	next := map[string]uint16{}
	for _, p := range policies {
		k8s := p.SourceKind == SourceKubernetes
		if k8s {
			for _, m := range client.Members(s.AppliedToGroups, p.AppliedToGroups) {
				for _, pr := range memberPrefixes(m) {
					if p.IsolateIngress {
						isolated[Ingress][pr] = true
					}
					if p.IsolateEgress {
						isolated[Egress][pr] = true
					}
				}
			}
		}
		rules := slices.Clone(p.Rules)
		idx := make(map[*apiv1.Rule]int, len(rules))
		for i, r := range p.Rules {
			idx[r] = i
		}
		slices.SortStableFunc(rules, func(a, b *apiv1.Rule) int { return cmp.Compare(a.Priority, b.Priority) })
		for _, r := range rules {
			d := Ingress
			if r.Direction == apiv1.Direction_EGRESS {
				d = Egress
			}
			rule := &Rule{Tag: ruleTag(p.Uid, idx[r]), PolicyUID: p.Uid, Policy: policyName(p), Name: r.Name,
				Direction: d, Action: actionName(r.Action, k8s), Logging: r.Logging}
			table, prio, direct := tableFor(d, k8s, p.TierPriority), uint16(prioK8sConj), uint16(prioK8sDirect)
			if !k8s {
				pr, ok := next[table]
				if !ok {
					pr = prioNativeTop
				}
				if pr < prioNativeLow {
					res.Unplaced[p.Uid]++ // out of priorities: the plugin reports it
					continue
				}
				next[table] = pr - 1
				prio, direct = pr, pr
			}
			rule.Priority = prio
			acts, jump := ruleOutcome(r.Action, k8s, d, table, rule, n)
			for _, c := range ruleConjs(s, p, r, d) {
				c.key = fmt.Sprintf("%s/%d/%s", p.Uid, idx[r], c.key)
				c.rule, c.table, c.priority, c.direct, c.actions, c.jump = rule, table, prio, direct, acts, jump
				conjs = append(conjs, c)
			}
			res.Rules[rule.Tag] = rule
		}
	}

	spreadK8sConjs(conjs)
	ids := conjIDs(conjs)
	for _, c := range conjs {
		id := ids[c.key]
		if emitConj(b, c, id) {
			c.rule.Conjs = append(c.rule.Conjs, id)
		}
	}
	for d, set := range isolated {
		table, field := IngressIsolation, dstOf
		if d == Egress {
			table, field = EgressIsolation, srcOf
		}
		for _, pr := range sortedPrefixes(set) {
			b.add(flow.Flow{Table: table, Priority: prioIsolation, Match: field(pr)})
		}
	}

	keys := slices.Clone(b.order)
	slices.SortFunc(keys, func(a, b flow.Key) int {
		return cmp.Or(cmp.Compare(tableRank(a.Table), tableRank(b.Table)), cmp.Compare(b.Priority, a.Priority),
			cmp.Compare(a.Match, b.Match))
	})
	res.Flows, res.Keys = make([]flow.Flow, 0, len(keys)), keys
	for _, k := range keys {
		f := b.flows[k]
		if len(f.Actions) > 1 {
			if _, ok := f.Actions[0].(*flow.ActConjunction); ok {
				slices.SortFunc(f.Actions, func(x, y flow.Action) int {
					a, b := x.(*flow.ActConjunction), y.(*flow.ActConjunction)
					return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Clause, b.Clause))
				})
				f.Actions = slices.CompactFunc(f.Actions, func(x, y flow.Action) bool {
					a, b := x.(*flow.ActConjunction), y.(*flow.ActConjunction)
					return *a == *b
				})
			}
		}
		res.Flows = append(res.Flows, *f)
	}
	return res
}

var tableRanks = func() map[string]int {
	m := map[string]int{}
	for i, t := range Tables() {
		m[t.Name] = i
	}
	return m
}()

func tableRank(t string) int { return tableRanks[t] }

func policyName(p *apiv1.Policy) string {
	if p.Namespace == "" {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}

func actionName(a apiv1.Action, k8s bool) string {
	if k8s {
		return "Allow"
	}
	return [...]string{"Allow", "Drop", "Reject", "Pass"}[a]
}

// tableFor is where a rule goes: Kubernetes rules in the rules table,
// native ones before it, or after the isolation drop for the baseline tier.
func tableFor(d Direction, k8s bool, tier int32) string {
	switch {
	case k8s && d == Egress:
		return EgressRules
	case k8s:
		return IngressRules
	case tier > kubernetesTier && d == Egress:
		return EgressBaseline
	case tier > kubernetesTier:
		return IngressBaseline
	case d == Egress:
		return EgressNative
	}
	return IngressNative
}

// afterSecurity is where an allowed packet continues: the stage after its
// direction's security stage.
func afterSecurity(d Direction) flow.Jump {
	if d == Egress {
		return flow.GotoStage(flow.StageRouting)
	}
	return flow.GotoStage(flow.StageConntrack)
}

// ruleOutcome is what a matching packet meets: Allow skips the rest of the
// direction's security tables, Drop drops, Reject punts to the plugin
// (which answers for the server) and drops, Pass hands over to the
// Kubernetes rules (from a baseline rule, Pass means no opinion: go on).
// A logged rule first sends a copy to the plugin.
func ruleOutcome(a apiv1.Action, k8s bool, d Direction, table string, r *Rule, n Node) ([]flow.Action, flow.Jump) {
	var acts []flow.Action
	if r.Logging {
		acts = append(acts, punt(UserdataLog, r, n))
	}
	if k8s {
		return acts, afterSecurity(d)
	}
	switch a {
	case apiv1.Action_DROP:
		return acts, flow.Jump{}
	case apiv1.Action_REJECT:
		if r.Logging {
			acts = acts[:0]
		}
		return append(acts, punt(UserdataReject, r, n)), flow.Jump{}
	case apiv1.Action_PASS:
		switch table {
		case EgressNative:
			return acts, flow.GotoTable(EgressRules)
		case IngressNative:
			return acts, flow.GotoTable(IngressRules)
		}
		return acts, afterSecurity(d)
	}
	return acts, afterSecurity(d)
}

// puntLen is how much of a packet a packet-in carries: enough for the
// Ethernet, IP and transport headers a reject or log line needs.
const puntLen = 128

func punt(kind byte, r *Rule, n Node) flow.Action {
	ud := Userdata(kind, r.Tag, r.Direction)
	if n.RejectMeter != 0 {
		return flow.ControllerMetered(puntLen, ud, flow.ReasonAction, n.RejectMeter)
	}
	return flow.Controller(puntLen, ud)
}

// SameFlow reports whether a and b (of the same key) are the same flow:
// tag, jump and actions. Conjunction actions compare by value, so the
// common case costs no formatting.
func SameFlow(a, b *flow.Flow) bool {
	if a.Tag != b.Tag || a.Goto != b.Goto || len(a.Actions) != len(b.Actions) || a.IdleTimeout != b.IdleTimeout || a.HardTimeout != b.HardTimeout {
		return false
	}
	for i := range a.Actions {
		ca, ok1 := a.Actions[i].(*flow.ActConjunction)
		cb, ok2 := b.Actions[i].(*flow.ActConjunction)
		switch {
		case ok1 && ok2:
			if *ca != *cb {
				return false
			}
		case ok1 != ok2:
			return false
		case a.Actions[i].String() != b.Actions[i].String():
			return false
		}
	}
	return true
}

// maxConjsPerFlow bounds the conjunction actions one clause flow carries:
// each is 8 bytes, and a flow must fit an OpenFlow message (64 KiB).
const maxConjsPerFlow = 1000

// spreadK8sConjs gives the Kubernetes conjunctions of a table descending
// priorities in groups of maxConjsPerFlow. Kubernetes rules only allow, so
// their order does not matter; what matters is that a clause many rules
// share (the applied-to pod of 10,000 rules) becomes one flow per group
// instead of one flow with 10,000 actions.
func spreadK8sConjs(cs []*conj) {
	byTable := map[string][]*conj{}
	for _, c := range cs {
		if c.table == EgressRules || c.table == IngressRules {
			byTable[c.table] = append(byTable[c.table], c)
		}
	}
	for _, tcs := range byTable {
		slices.SortFunc(tcs, func(a, b *conj) int { return strings.Compare(a.key, b.key) })
		for i, c := range tcs {
			c.priority = uint16(max(prioK8sConj-i/maxConjsPerFlow, prioIsolation+1))
		}
	}
}

// ruleTag identifies a rule across recomputations: a hash of its policy and
// position, never 0.
func ruleTag(uid string, i int) uint32 {
	h := fnv.New32a()
	h.Write([]byte(uid))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(i)))
	if v := h.Sum32(); v != 0 {
		return v
	}
	return 1
}

// conjIDs gives each conjunction an ID derived from its key, so the same
// rule keeps its ID across recomputations and plugin restarts; collisions
// are resolved by probing in key order, which is the same every time for
// the same span.
func conjIDs(cs []*conj) map[string]uint32 {
	keys := make([]string, 0, len(cs))
	for _, c := range cs {
		keys = append(keys, c.key)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	used := map[uint32]bool{}
	out := make(map[string]uint32, len(keys))
	for _, k := range keys {
		h := fnv.New32a()
		h.Write([]byte(k))
		id := h.Sum32()
		for id == 0 || used[id] {
			id++
		}
		used[id] = true
		out[k] = id
	}
	return out
}

// memberPrefixes are a member's addresses as host prefixes.
func memberPrefixes(m *apiv1.Member) []netip.Prefix {
	var out []netip.Prefix
	for _, b := range m.Ips {
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			continue
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out
}

func membersPrefixes(ms []*apiv1.Member) []netip.Prefix {
	set := map[netip.Prefix]bool{}
	for _, m := range ms {
		for _, p := range memberPrefixes(m) {
			set[p] = true
		}
	}
	return sortedPrefixes(set)
}

func sortedPrefixes(set map[netip.Prefix]bool) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	return out
}

// ruleConjs turns one rule into its conjunctions: one for its numbered
// ports (or every port), and one per set of destination pods that resolve
// its named ports alike.
func ruleConjs(s *client.State, p *apiv1.Policy, r *apiv1.Rule, d Direction) []*conj {
	atgIDs := r.AppliedToGroups
	if len(atgIDs) == 0 {
		atgIDs = p.AppliedToGroups
	}
	local := client.Members(s.AppliedToGroups, atgIDs)
	if len(local) == 0 {
		return nil
	}
	peerMembers := client.Members(s.AddressGroups, r.AddressGroups)
	var peers []netip.Prefix // nil: any peer
	if !r.AnyPeer {
		set := map[netip.Prefix]bool{}
		for _, pr := range membersPrefixes(peerMembers) {
			set[pr] = true
		}
		for _, blk := range r.IpBlocks {
			for _, pr := range ipBlockPrefixes(blk) {
				set[pr] = true
			}
		}
		peers = sortedPrefixes(set)
		if len(peers) == 0 {
			return nil // no peer yet: the rule allows nothing
		}
	}
	localPrefixes := membersPrefixes(local)
	mk := func(key string, dsts []netip.Prefix, svcs []svc, anySvc bool) *conj {
		c := &conj{key: key, svcs: svcs, anySvc: anySvc}
		if d == Ingress {
			c.src, c.dst = peers, dsts
		} else {
			c.src, c.dst = localPrefixes, dsts
		}
		return c
	}
	// The destination side: the local pods for ingress, the peers for egress.
	dstAll := localPrefixes
	dstMembers := local
	if d == Egress {
		dstAll, dstMembers = peers, peerMembers
	}
	if len(r.Ports) == 0 {
		return []*conj{mk("all", dstAll, nil, true)}
	}
	var out []*conj
	var numbered []svc
	var named []*apiv1.Port
	for _, pt := range r.Ports {
		if pt.Name != "" {
			named = append(named, pt)
			continue
		}
		numbered = append(numbered, portSvcs(protoNum(pt.Protocol), pt.Port, pt.EndPort)...)
	}
	if len(numbered) > 0 {
		out = append(out, mk("ports", dstAll, numbered, false))
	}
	// For an egress rule to anywhere, the controller sends every pod as an
	// address group, so its named ports resolve.
	if len(named) > 0 {
		// Group the destination pods by what the names resolve to.
		byPorts := map[string][]*apiv1.Member{}
		svcsOf := map[string][]svc{}
		for _, m := range dstMembers {
			var ss []svc
			for _, pt := range named {
				for _, np := range m.Ports {
					if np.Name == pt.Name && strings.EqualFold(protoName(np.Protocol), protoName(pt.Protocol)) {
						ss = append(ss, svc{proto: protoNum(pt.Protocol), port: uint16(np.Port), mask: 0xffff})
					}
				}
			}
			if len(ss) == 0 {
				continue
			}
			slices.SortFunc(ss, func(a, b svc) int { return cmp.Or(cmp.Compare(a.proto, b.proto), cmp.Compare(a.port, b.port)) })
			ss = slices.Compact(ss)
			var kb strings.Builder
			for _, x := range ss {
				fmt.Fprintf(&kb, "%d:%d,", x.proto, x.port)
			}
			k := kb.String()
			byPorts[k] = append(byPorts[k], m)
			svcsOf[k] = ss
		}
		for _, k := range slices.Sorted(mapKeys(byPorts)) {
			out = append(out, mk("named:"+k, membersPrefixes(byPorts[k]), svcsOf[k], false))
		}
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func protoName(p string) string {
	if p == "" {
		return "TCP"
	}
	return strings.ToUpper(p)
}

func protoNum(p string) uint8 {
	switch protoName(p) {
	case "UDP":
		return flow.ProtoUDP
	case "SCTP":
		return flow.ProtoSCTP
	}
	return flow.ProtoTCP
}

// portSvcs is a port, a range or every port of proto.
func portSvcs(proto uint8, port, end int32) []svc {
	if port <= 0 {
		return []svc{{proto: proto}}
	}
	if end < port {
		end = port
	}
	var out []svc
	for _, r := range PortRange(uint16(port), uint16(min(end, 65535))) {
		out = append(out, svc{proto: proto, port: r[0], mask: r[1]})
	}
	return out
}

// PortRange splits [start, end] into value/mask pairs that together match
// exactly the ports of the range.
func PortRange(start, end uint16) [][2]uint16 {
	var out [][2]uint16
	s, e := uint32(start), uint32(end)
	for s <= e {
		// The largest aligned block starting at s that fits.
		size := uint32(1)
		for s&(size*2-1) == 0 && s+size*2-1 <= e && size < 1<<16 {
			size *= 2
		}
		out = append(out, [2]uint16{uint16(s), uint16(^(size - 1))})
		s += size
	}
	return out
}

// ipBlockPrefixes is the block's CIDR less its exceptions, as prefixes.
func ipBlockPrefixes(b *apiv1.IPBlock) []netip.Prefix {
	c, err := netip.ParsePrefix(b.Cidr)
	if err != nil {
		return nil
	}
	out := []netip.Prefix{c.Masked()}
	for _, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			continue
		}
		var next []netip.Prefix
		for _, p := range out {
			next = append(next, subtract(p, ex.Masked())...)
		}
		out = next
	}
	return out
}

// subtract returns p without ex.
func subtract(p, ex netip.Prefix) []netip.Prefix {
	if p.Addr().Is4() != ex.Addr().Is4() || !p.Overlaps(ex) {
		return []netip.Prefix{p}
	}
	if ex.Bits() <= p.Bits() {
		return nil // ex covers p
	}
	// Split p in halves and keep the half ex is not in, recursively.
	var out []netip.Prefix
	cur := p
	for cur.Bits() < ex.Bits() {
		lo, hi := halves(cur)
		if lo.Contains(ex.Addr()) {
			out = append(out, hi)
			cur = lo
		} else {
			out = append(out, lo)
			cur = hi
		}
	}
	return out
}

func halves(p netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := p.Bits() + 1
	lo := netip.PrefixFrom(p.Addr(), bits).Masked()
	b := lo.Addr().AsSlice()
	i := (bits - 1) / 8
	b[i] |= 0x80 >> ((bits - 1) % 8)
	a, _ := netip.AddrFromSlice(b)
	return lo, netip.PrefixFrom(a, bits)
}

func family(p netip.Prefix) flow.IPVersion {
	if p.Addr().Is4() {
		return flow.V4
	}
	return flow.V6
}

func srcOf(p netip.Prefix) flow.Match { return flow.Match{}.IP(family(p)).IPSrc(p) }
func dstOf(p netip.Prefix) flow.Match { return flow.Match{}.IP(family(p)).IPDst(p) }

func svcMatch(v flow.IPVersion, s svc) flow.Match {
	m := flow.Match{}.L4(v, s.proto)
	if s.mask == 0 {
		return m
	}
	switch s.proto {
	case flow.ProtoUDP:
		return m.UDPDstMasked(s.port, s.mask)
	case flow.ProtoSCTP:
		return m.SCTPDstMasked(s.port, s.mask)
	}
	return m.TCPDstMasked(s.port, s.mask)
}

// emitConj writes one conjunction's flows; false if it can match nothing.
func emitConj(b *builder, c *conj, id uint32) bool {
	fams := map[flow.IPVersion]bool{}
	for _, p := range append(slices.Clone(c.src), c.dst...) {
		fams[family(p)] = true
	}
	var dims [][]flow.Match
	for _, side := range []struct {
		ps []netip.Prefix
		fn func(netip.Prefix) flow.Match
	}{{c.src, srcOf}, {c.dst, dstOf}} {
		if side.ps == nil {
			continue
		}
		var ms []flow.Match
		for _, p := range side.ps {
			ms = append(ms, side.fn(p))
		}
		dims = append(dims, ms)
	}
	if !c.anySvc {
		var ms []flow.Match
		for _, v := range []flow.IPVersion{flow.V4, flow.V6} {
			if !fams[v] {
				continue
			}
			for _, s := range c.svcs {
				ms = append(ms, svcMatch(v, s))
			}
		}
		dims = append(dims, ms)
	}
	for _, d := range dims {
		if len(d) == 0 {
			return false
		}
	}
	tag := c.rule.Tag
	if len(dims) == 1 {
		for _, m := range dims[0] {
			b.add(flow.Flow{Table: c.table, Priority: c.direct, Match: m, Actions: c.actions, Goto: c.jump, Tag: tag})
		}
		return true
	}
	n := uint8(len(dims))
	for i, d := range dims {
		for _, m := range d {
			b.add(flow.Flow{Table: c.table, Priority: c.priority, Match: m,
				Actions: []flow.Action{flow.Conjunction(id, uint8(i+1), n)}})
		}
	}
	b.add(flow.Flow{Table: c.table, Priority: c.priority, Match: flow.Match{}.ConjID(id), Actions: c.actions, Goto: c.jump, Tag: tag})
	return true
}

// EpochFlows are the flows that carry n.Epoch: the conntrack lookup of
// IPv4 and IPv6.
func EpochFlows(n Node) []flow.Flow {
	return []flow.Flow{ctStateFlow(flow.V4, n), ctStateFlow(flow.V6, n)}
}

func ctStateFlow(v flow.IPVersion, n Node) flow.Flow {
	return flow.Flow{Table: CTState, Priority: prioStatic, Match: flow.Match{}.IP(v),
		Actions: []flow.Action{flow.LoadField(Epoch, uint32(n.Epoch)), flow.Conntrack(flow.CT{Zone: n.CTZone, Resume: flow.GotoTable(CTFlags)})}}
}

// staticFlows are the flows that do not depend on the span: conntrack,
// replies, the node's own traffic, and the commit of new connections.
func staticFlows(b *builder, n Node) {
	for _, v := range []flow.IPVersion{flow.V4, flow.V6} {
		ip := flow.Match{}.IP(v)
		b.add(ctStateFlow(v, n))
		// The userspace datapath's conntrack keys SCTP by addresses alone,
		// so two SCTP associations between the same pods in opposite
		// directions would pass for each other's replies. SCTP is left
		// untracked; an allowed SCTP packet instead learns the flow that
		// lets its replies pass (below), keyed by addresses and ports.
		sctp := ip.IPProto(flow.ProtoSCTP)
		b.add(flow.Flow{Table: CTState, Priority: prioStatic + 10, Match: sctp, Goto: flow.NextTable()})
		b.add(flow.Flow{Table: RejectResume, Priority: prioStatic, Match: sctp,
			Actions: []flow.Action{flow.Resubmit(flow.GotoTable(SCTPReplies))}, Goto: flow.NextTable()})
		src, dst := flow.MatchIPv4Src, flow.MatchIPv4Dst
		if v == flow.V6 {
			src, dst = flow.MatchIPv6Src, flow.MatchIPv6Dst
		}
		b.add(flow.Flow{Table: CTCommit, Priority: prioStatic, Match: sctp.Field(Bypass, 0),
			Actions: []flow.Action{flow.Learn(flow.ActLearn{Table: SCTPReplies, Priority: prioStatic, IdleTimeout: sctpReplyIdle,
				Specs: []flow.LearnSpec{
					flow.LearnMatchValue(flow.Header(flow.MatchEthType), uint64(ethType(v))),
					flow.LearnMatchValue(flow.Header(flow.MatchIPProto), uint64(flow.ProtoSCTP)),
					flow.LearnMatchFrom(flow.Header(src), flow.Header(dst)),
					flow.LearnMatchFrom(flow.Header(dst), flow.Header(src)),
					flow.LearnMatchFrom(flow.Header(flow.MatchSCTPSrc), flow.Header(flow.MatchSCTPDst)),
					flow.LearnMatchFrom(flow.Header(flow.MatchSCTPDst), flow.Header(flow.MatchSCTPSrc)),
					flow.LearnLoadValue(1, flow.Reg(Bypass)),
				}})}, Goto: flow.NextTable()})
		// What the lookup said, kept in netpol's registers (see CTReply).
		reply, rel := flow.CTTracked|flow.CTEstablished|flow.CTReply, flow.CTTracked|flow.CTRelated
		b.add(flow.Flow{Table: CTFlags, Priority: prioStatic + 30, Match: ip.CTState(reply, reply),
			Actions: []flow.Action{flow.LoadField(CTReply, 1)}, Goto: flow.NextTable()})
		b.add(flow.Flow{Table: CTFlags, Priority: prioStatic + 20, Match: ip.CTState(rel, rel|flow.CTInvalid),
			Actions: []flow.Action{flow.LoadField(CTRelated, 1)}, Goto: flow.NextTable()})
		b.add(flow.Flow{Table: CTFlags, Priority: prioStatic + 10, Match: ip.CTState(flow.CTNew|flow.CTTracked, flow.CTNew|flow.CTTracked),
			Actions: []flow.Action{flow.LoadField(CTNew, 1)}, Goto: flow.NextTable()})
		b.add(flow.Flow{Table: CTCommit, Priority: prioStatic, Match: ip.Field(CTNew, 1),
			Actions: []flow.Action{flow.Conntrack(flow.CT{Commit: true, Zone: n.CTZone})}, Goto: flow.NextTable()})
		for _, d := range []Direction{Egress, Ingress} {
			table := EgressNative
			if d == Ingress {
				table = IngressNative
			}
			b.add(flow.Flow{Table: table, Priority: prioBypass, Match: ip.Field(Bypass, 1), Goto: afterSecurity(d)})
			b.add(flow.Flow{Table: table, Priority: prioConnState, Match: ip.Field(CTReply, 1), Goto: afterSecurity(d)})
			b.add(flow.Flow{Table: table, Priority: prioConnState, Match: ip.Field(CTRelated, 1), Goto: afterSecurity(d)})
		}
	}
	for _, a := range n.Trusted {
		p := netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		b.add(flow.Flow{Table: IngressNative, Priority: prioNode,
			Match: srcOf(p).Field(flow.FieldPacketSource, flow.PacketSourceGateway), Goto: afterSecurity(Ingress)})
	}
}
