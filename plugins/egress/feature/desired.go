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

// EgressView is an Egress with allocated IPs.
type EgressView struct {
	Name    string
	Created time.Time
	// IPs are one per family, IPv4 first (status.egressIPs); the first
	// decides the holder, which holds them all.
	IPs  []netip.Addr
	Pool string
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

// Placement is where one Egress's IPs live.
type Placement struct {
	Egress string
	IPs    []netip.Addr
	// Holder is the node holding it ("" when no live node may).
	Holder string
	// Pods selected (namespace/name).
	Pods []string
}

// Plan is what the node should look like.
type Plan struct {
	Placements []Placement
	// Held are the Egress IPs this node holds, with their selected pods'
	// addresses of the same family.
	Held map[netip.Addr][]netip.Addr
	// Bandwidth of the held IPs that have a limit, by the Egress's first
	// IP: a dual-stack Egress has one limit for both families.
	Bandwidth map[netip.Addr]Bandwidth
	// MeterIP maps every held IP of a limited Egress to the Egress's
	// first IP, whose mark names the meter they share.
	MeterIP map[netip.Addr]netip.Addr
	// Pods are the flows' inputs, MarkID left to the caller (0).
	Pods []flows.Pod
}

// Desired computes the plan. An Egress's holder comes from the ring of the
// live nodes its pool allows; a pod's address selected by several
// Egresses of its family belongs to the oldest.
func Desired(s Snapshot, rings func(nodes []string) *placement.Ring) Plan {
	egs := slices.Clone(s.Egresses)
	slices.SortFunc(egs, func(a, b EgressView) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	plan := Plan{Held: map[netip.Addr][]netip.Addr{}, Bandwidth: map[netip.Addr]Bandwidth{}, MeterIP: map[netip.Addr]netip.Addr{}}
	claimed := map[netip.Addr]bool{}
	for _, e := range egs {
		if len(e.IPs) == 0 {
			continue
		}
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
		holder := rings(eligible).Holder(e.IPs[0])
		pl := Placement{Egress: e.Name, IPs: e.IPs, Holder: holder}
		if holder == s.Self {
			for _, ip := range e.IPs {
				plan.Held[ip] = nil
				if e.Bandwidth.RateKbps > 0 {
					plan.MeterIP[ip] = e.IPs[0]
				}
			}
			if e.Bandwidth.RateKbps > 0 {
				plan.Bandwidth[e.IPs[0]] = e.Bandwidth
			}
		}
		for _, p := range s.Pods {
			if !selects(e, p, s.Namespaces) {
				continue
			}
			key := p.Namespace + "/" + p.Name
			selected := false
			for _, ip := range p.IPs {
				eip, ok := sameFamily(e.IPs, ip)
				if !ok || claimed[ip] {
					continue
				}
				claimed[ip], selected = true, true
				if holder == "" {
					continue
				}
				fp := flows.Pod{Key: key, IP: ip, Local: p.Node == s.Self}
				if holder != s.Self {
					fp.Holder = s.Nodes[holder].IP
				} else {
					plan.Held[eip] = append(plan.Held[eip], ip)
				}
				if fp.Local || holder == s.Self {
					plan.Pods = append(plan.Pods, fp)
				}
			}
			if selected {
				pl.Pods = append(pl.Pods, key)
			}
		}
		plan.Placements = append(plan.Placements, pl)
	}
	return plan
}

// sameFamily is the Egress IP of ip's family.
func sameFamily(ips []netip.Addr, ip netip.Addr) (netip.Addr, bool) {
	for _, a := range ips {
		if a.Is4() == ip.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
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
