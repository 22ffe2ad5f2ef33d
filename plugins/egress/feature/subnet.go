package feature

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"

	crdv1 "switchyard.dev/switchyard/controller/apis/crd/v1beta1"
	ctrlegress "switchyard.dev/switchyard/controller/egress"
	"switchyard.dev/switchyard/plugins/egress/hostnet"
	"switchyard.dev/switchyard/sdk"
)

// Subnet is an ExternalIPPool's spec.subnetInfo, checked as the
// controller checks it (ctrlegress.ParseSubnet).
type Subnet = ctrlegress.Subnet

// maxRouteTableBase keeps the plugin's last table in an int32.
const maxRouteTableBase = math.MaxInt32 - 255

// routeState is what the loop remembers of the policy routing it applied.
type routeState struct {
	// lastMarks is the mark table last installed ("" at start, so the
	// first sync replaces whatever a previous incarnation left).
	lastMarks string
	// clean: the last sync wanted no routing and left none, so the next
	// that wants none has nothing to look for (a node without subnetInfo
	// pools does not dump its routes every pass).
	clean bool
	// logged is, per routed IP, the route last logged.
	logged map[netip.Addr]string
	// warned is, per pool, the subnetInfo problem last logged.
	warned map[string]string
}

// poolSubnet is the subnet of pool p (ok false when it has no
// subnetInfo, or an invalid one: the controller refuses such a pool, so
// no Egress should hold one of its IPs; the plugin routes none by it).
func (e *Egress) poolSubnet(p *crdv1.ExternalIPPool) (Subnet, bool) {
	if p.Spec.SubnetInfo == nil {
		return Subnet{}, false
	}
	sub, err := ctrlegress.ParseSubnet(p.Spec.SubnetInfo, p.Spec.IPRanges)
	if err != nil {
		if e.routes.warned == nil {
			e.routes.warned = map[string]string{}
		}
		if e.routes.warned[p.Name] != err.Error() {
			e.routes.warned[p.Name] = err.Error()
			e.log.Warn("ExternalIPPool has an invalid subnetInfo; its IPs follow the main routing table", "pool", p.Name, "error", err)
		}
		return Subnet{}, false
	}
	delete(e.routes.warned, p.Name)
	return sub, true
}

// RoutingFor is the policy routing the plan wants: every Egress IP this
// node holds whose pool has a subnet containing it, with the IP's mark
// (marks[ip] in the grant, as the flows and the SNAT use it) and table
// (tableBase + the mark's ID). An IP without a mark (more than 255 held)
// is left to the main table, as its traffic is left unmarked.
func RoutingFor(s Snapshot, plan Plan, marks map[netip.Addr]uint32, grant sdk.Grant, tableBase int, gateway string) hostnet.Routing {
	r := hostnet.Routing{Keep: s.Keep, Gateway: gateway, TableBase: tableBase}
	egs := slices.Clone(s.Egresses)
	slices.SortFunc(egs, func(a, b EgressView) int { return strings.Compare(a.Name, b.Name) })
	done := map[netip.Addr]bool{}
	for _, eg := range egs {
		sub, ok := s.PoolSubnets[eg.Pool]
		if !ok {
			continue
		}
		// The subnet is of one family: only that family's IP is routed.
		for _, ip := range eg.IPs {
			srcs, held := plan.Held[ip]
			id := marks[ip]
			if !held || done[ip] || id == 0 || !sub.Prefix.Contains(ip) || ip == sub.Gateway {
				continue
			}
			done[ip] = true
			r.IPs = append(r.IPs, hostnet.RoutedIP{Egress: eg.Name, IP: ip, Subnet: sub.Prefix, Gateway: sub.Gateway,
				Table: tableBase + int(id), Mark: id << grant.Offset, MarkMask: uint32(grant.Mask()),
				Sources: slices.SortedFunc(slices.Values(srcs), netip.Addr.Compare)})
		}
	}
	slices.SortFunc(r.IPs, func(a, b hostnet.RoutedIP) int { return a.IP.Compare(b.IP) })
	return r
}

// applyRouting makes the node's policy routing that of the plan: rules
// and routes every sync while any IP is routed (so drift, such as a
// network manager flushing foreign rules, is repaired) and at the first
// (a crashed incarnation's leftovers go); the mark table when it changes.
func (e *Egress) applyRouting(s Snapshot, plan Plan) error {
	r := RoutingFor(s, plan, e.marks, e.local.Mark, e.cfg.RouteTableBase, e.cfg.Gateway)
	if len(r.IPs) > 0 || !e.routes.clean {
		if err := hostnet.ApplyRoutes(r, e.uplink); err != nil {
			return fmt.Errorf("egress policy routing: %w", err)
		}
		e.routes.clean = len(r.IPs) == 0
	}
	if k := fmt.Sprint(r); k != e.routes.lastMarks {
		if err := hostnet.ApplyRouteMarks(r); err != nil {
			return err
		}
		e.routes.lastMarks = k
	}
	if e.routes.logged == nil {
		e.routes.logged = map[netip.Addr]string{}
	}
	now := map[netip.Addr]bool{}
	for _, ip := range r.IPs {
		now[ip.IP] = true
		k := fmt.Sprintf("%s %s %s %d %#x", ip.Egress, ip.Subnet, ip.Gateway, ip.Table, ip.Mark)
		if e.routes.logged[ip.IP] == k {
			continue
		}
		e.routes.logged[ip.IP] = k
		e.log.Info("Egress IP routed through its subnet's gateway", "egress", ip.Egress, "ip", ip.IP, "gateway", ip.Gateway,
			"subnet", ip.Subnet, "table", ip.Table, "uplink", e.uplink.Attrs().Name,
			"fwmark", fmt.Sprintf("%#x/%#x", ip.Mark, ip.MarkMask), "rule_priority", hostnet.RulePriority, "pods", len(ip.Sources))
	}
	for _, ip := range slices.Collect(maps.Keys(e.routes.logged)) {
		if !now[ip] {
			e.log.Info("Egress IP no longer routed through a subnet gateway", "ip", ip, "was", e.routes.logged[ip])
			delete(e.routes.logged, ip)
		}
	}
	return nil
}
