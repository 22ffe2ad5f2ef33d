package feature

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"switchyard.dev/switchyard/plugins/egress/flows"
	"switchyard.dev/switchyard/plugins/egress/placement"
)

// Snapshot is the cluster as the plugin sees it at one moment: the pure
// input of Desired.
type Snapshot struct {
	Self  string
	Nodes map[string]NodeView
	// Alive are the nodes memberlist sees alive (Self always is).
	Alive    map[string]bool
	Pools    map[string]labels.Selector
	Egresses []EgressView
	Pods     []PodView
	// Namespaces maps a namespace to its labels.
	Namespaces map[string]labels.Set
	Keep       []netip.Prefix
	// PoolSubnets are the pools' subnetInfo, for those that have a valid
	// one (subnet.go).
	PoolSubnets map[string]Subnet
}

// NodeView is a Node as placement needs it.
type NodeView struct {
	Labels   labels.Set
	IP       netip.Addr
	PodCIDRs []netip.Prefix
}

// EgressView is an Egress with an allocated IP.
type EgressView struct {
	Name    string
	Created time.Time
	IP      netip.Addr
	Pool    string
	// Pods and Namespaces select the pods (nil: everything).
	Pods, Namespaces labels.Selector
	// Bandwidth limits the Egress (zero: no limit).
	Bandwidth Bandwidth
}

// Bandwidth is a rate in kbit/s and a burst in kbit.
type Bandwidth struct{ RateKbps, BurstKbit uint32 }

// PodView is a pod with an address.
type PodView struct {
	Namespace, Name, Node string
	Labels                labels.Set
	IPs                   []netip.Addr
}

// Placement is where one Egress IP lives.
type Placement struct {
	Egress string
	IP     netip.Addr
	// Holder is the node holding it ("" when no live node may).
	Holder string
	// Pods selected (namespace/name).
	Pods []string
}

// Plan is what the node should look like.
type Plan struct {
	Placements []Placement
	// Held are the Egress IPs this node holds, with their selected pods'
	// IPv4 addresses.
	Held map[netip.Addr][]netip.Addr
	// Bandwidth of the held IPs that have a limit.
	Bandwidth map[netip.Addr]Bandwidth
	// Pods are the flows' inputs, MarkID left to the caller (0).
	Pods []flows.Pod
}

// Desired computes the plan. An Egress's holder comes from the ring of the
// live nodes its pool allows; a pod selected by several Egresses belongs to
// the oldest.
func Desired(s Snapshot, rings func(nodes []string) *placement.Ring) Plan {
	egs := slices.Clone(s.Egresses)
	slices.SortFunc(egs, func(a, b EgressView) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	plan := Plan{Held: map[netip.Addr][]netip.Addr{}, Bandwidth: map[netip.Addr]Bandwidth{}}
	claimed := map[string]bool{}
	for _, e := range egs {
		var eligible []string
		sel, hasPool := s.Pools[e.Pool]
		if e.Pool != "" && !hasPool {
			continue
		}
		for name, n := range s.Nodes {
			if !s.Alive[name] || !n.IP.IsValid() {
				continue
			}
			if sel != nil && !sel.Matches(n.Labels) {
				continue
			}
			eligible = append(eligible, name)
		}
		slices.Sort(eligible)
		holder := rings(eligible).Holder(e.IP)
		pl := Placement{Egress: e.Name, IP: e.IP, Holder: holder}
		if holder == s.Self {
			plan.Held[e.IP] = nil
			if e.Bandwidth.RateKbps > 0 {
				plan.Bandwidth[e.IP] = e.Bandwidth
			}
		}
		for _, p := range s.Pods {
			key := p.Namespace + "/" + p.Name
			if claimed[key] || !selects(e, p, s.Namespaces) {
				continue
			}
			claimed[key] = true
			pl.Pods = append(pl.Pods, key)
			if holder == "" {
				continue
			}
			for _, ip := range p.IPs {
				if !ip.Is4() {
					continue // IPv6 Egress is not supported yet
				}
				fp := flows.Pod{Key: key, IP: ip, Local: p.Node == s.Self}
				if holder != s.Self {
					fp.Holder = s.Nodes[holder].IP
				} else {
					plan.Held[e.IP] = append(plan.Held[e.IP], ip)
				}
				if fp.Local || holder == s.Self {
					plan.Pods = append(plan.Pods, fp)
				}
			}
		}
		plan.Placements = append(plan.Placements, pl)
	}
	return plan
}

func selects(e EgressView, p PodView, ns map[string]labels.Set) bool {
	if e.Pods != nil && !e.Pods.Matches(p.Labels) {
		return false
	}
	if e.Namespaces != nil {
		l, ok := ns[p.Namespace]
		if !ok || !e.Namespaces.Matches(l) {
			return false
		}
	}
	return true
}
