package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"switchyard.dev/switchyard/plugins/internal/nftmatch"
)

// Policy routing of the Egress IPs whose pool has subnetInfo: their
// SNATed traffic leaves through the subnet's gateway on the uplink, not by
// the node's main routing table.
//
//	ip rule   priority RulePriority  fwmark <id<<offset>/<grant mask>  lookup <base+id>
//	table base+id:  <subnet> dev <uplink> scope link
//	                default via <gateway> dev <uplink>
//
// The mark is the one OVS sets on the kernel datapath (package flows); the
// userspace datapath does not carry pkt_mark into the kernel, so the
// nftables table RouteTableName sets the same bits, in prerouting before
// the routing decision, on what enters from podnet's gateway from a
// selected pod to a destination that is not kept, in a connection's
// original direction (replies to connections that came in from outside
// keep following the main table, as the SNAT leaves them alone too).
//
// The plugin's rules are those at RulePriority whose table is in
// (TableBase, TableBase+255]; the tables in that range are all its own. A
// sync removes every such rule and route it does not want, so leftovers of
// a crashed incarnation go at the next start.

// RouteTableName is the nftables table (family ip) that marks routed
// Egress traffic.
const RouteTableName = "switchyard-egress-route"

// RulePriority is the priority of the plugin's ip rules: after the local
// table (0), before main (32766).
const RulePriority = 1100

// RoutedIP is one Egress IP this node holds whose traffic leaves through
// its subnet's gateway.
type RoutedIP struct {
	// Egress names the Egress, for logs.
	Egress string
	IP     netip.Addr
	// Subnet (masked) and Gateway are the pool's subnetInfo.
	Subnet  netip.Prefix
	Gateway netip.Addr
	// Table is the routing table of the IP, in (TableBase, TableBase+255].
	Table int
	// Mark and MarkMask are the IP's pkt_mark bits (as the SNAT's).
	Mark, MarkMask uint32
	// Sources are the selected pods' addresses.
	Sources []netip.Addr
}

// Routing is the whole policy routing of the node's Egress IPs.
type Routing struct {
	// Keep are destinations never routed this way (the SNAT's keep list).
	Keep []netip.Prefix
	// Gateway is podnet's gateway device: only what enters from it (the
	// pods' traffic) is marked.
	Gateway string
	// TableBase: tables TableBase+1..TableBase+255 are the plugin's.
	TableBase int
	IPs       []RoutedIP
}

// ownTable says whether table is in the plugin's range. A base below 256
// owns nothing: its range would hold the kernel's main and local tables.
func ownTable(base, table int) bool { return base >= 256 && table > base && table <= base+255 }

// Rules are the ip rules r wants.
func (r Routing) Rules() []netlink.Rule {
	var out []netlink.Rule
	for _, ip := range r.IPs {
		if !ip.IP.Is4() {
			continue
		}
		rule := netlink.NewRule()
		rule.Family = netlink.FAMILY_V4
		rule.Priority = RulePriority
		rule.Table = ip.Table
		rule.Mark = ip.Mark
		mask := ip.MarkMask
		rule.Mask = &mask
		out = append(out, *rule)
	}
	return out
}

// Routes are the routes r wants, through the uplink with index uplink:
// for each IP its subnet on the link, then the default via the gateway
// (the kernel checks the gateway against the table's own subnet route).
func (r Routing) Routes(uplink int) []netlink.Route {
	var out []netlink.Route
	for _, ip := range r.IPs {
		if !ip.IP.Is4() {
			continue
		}
		out = append(out,
			netlink.Route{Family: netlink.FAMILY_V4, Table: ip.Table, LinkIndex: uplink, Scope: netlink.SCOPE_LINK, Dst: ipnet(ip.Subnet.Masked())},
			netlink.Route{Family: netlink.FAMILY_V4, Table: ip.Table, LinkIndex: uplink, Scope: netlink.SCOPE_UNIVERSE,
				Dst: ipnet(netip.PrefixFrom(netip.IPv4Unspecified(), 0)), Gw: ip.Gateway.AsSlice()})
	}
	return out
}

// RuleKey and RouteKey identify a rule or route in diffs and messages.
func RuleKey(r netlink.Rule) string {
	var mask uint32
	if r.Mask != nil {
		mask = *r.Mask
	}
	return fmt.Sprintf("priority %d fwmark %#x/%#x lookup %d", r.Priority, r.Mark, mask, r.Table)
}

// RouteKey is a route as `ip route show table N` would say it.
func RouteKey(r netlink.Route) string {
	s := fmt.Sprintf("table %d %s", r.Table, r.Dst)
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	s += fmt.Sprintf(" dev #%d", r.LinkIndex)
	if r.Scope == netlink.SCOPE_LINK {
		s += " scope link"
	}
	return s
}

// ApplyRoutes makes the plugin's rules and routes those of r, through
// uplink: new routes first, then new rules, then the rules and routes
// (the plugin's: see ownTable) no longer wanted.
func ApplyRoutes(r Routing, uplink netlink.Link) error {
	have, err := ownRules(r.TableBase)
	if err != nil {
		return err
	}
	haveRoutes, err := ownRoutes(r.TableBase)
	if err != nil {
		return err
	}
	wantRules, wantRoutes := map[string]bool{}, map[string]bool{}
	for _, rt := range r.Routes(uplink.Attrs().Index) {
		wantRoutes[RouteKey(rt)] = true
		if haveRoutes[RouteKey(rt)] != nil {
			continue
		}
		if err := netlink.RouteReplace(&rt); err != nil {
			return fmt.Errorf("adding route %s (%s): %w", RouteKey(rt), uplink.Attrs().Name, err)
		}
	}
	for _, rule := range r.Rules() {
		wantRules[RuleKey(rule)] = true
		if have[RuleKey(rule)] != nil {
			continue
		}
		if err := netlink.RuleAdd(&rule); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("adding ip rule %s: %w", RuleKey(rule), err)
		}
	}
	var errs []error
	for k, rule := range have {
		if !wantRules[k] {
			errs = append(errs, delRule(rule))
		}
	}
	for k, rt := range haveRoutes {
		if !wantRoutes[k] {
			errs = append(errs, delRoute(rt))
		}
	}
	return errors.Join(errs...)
}

// RemoveRoutes deletes the mark table and every rule and route of the
// plugin's table range.
func RemoveRoutes(tableBase int) error {
	errs := []error{RemoveRouteMarks()}
	rules, err := ownRules(tableBase)
	errs = append(errs, err)
	for _, rule := range rules {
		errs = append(errs, delRule(rule))
	}
	routes, err := ownRoutes(tableBase)
	errs = append(errs, err)
	for _, rt := range routes {
		errs = append(errs, delRoute(rt))
	}
	return errors.Join(errs...)
}

func ownRules(base int) (map[string]*netlink.Rule, error) {
	rules, err := netlink.RuleListFiltered(netlink.FAMILY_V4, &netlink.Rule{Priority: RulePriority}, netlink.RT_FILTER_PRIORITY)
	if err != nil {
		return nil, fmt.Errorf("listing ip rules: %w", err)
	}
	out := map[string]*netlink.Rule{}
	for i := range rules {
		if ownTable(base, rules[i].Table) {
			out[RuleKey(rules[i])] = &rules[i]
		}
	}
	return out, nil
}

func ownRoutes(base int) (map[string]*netlink.Route, error) {
	// Table 0 with the table filter: every table.
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("listing routes: %w", err)
	}
	out := map[string]*netlink.Route{}
	for i := range routes {
		if ownTable(base, routes[i].Table) {
			out[RouteKey(routes[i])] = &routes[i]
		}
	}
	return out, nil
}

func delRule(rule *netlink.Rule) error {
	del := netlink.NewRule()
	del.Family, del.Priority, del.Table, del.Mark, del.Mask = netlink.FAMILY_V4, rule.Priority, rule.Table, rule.Mark, rule.Mask
	if err := netlink.RuleDel(del); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing ip rule %s: %w", RuleKey(*rule), err)
	}
	return nil
}

func delRoute(rt *netlink.Route) error {
	if err := netlink.RouteDel(rt); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("removing route %s: %w", RouteKey(*rt), err)
	}
	return nil
}

// ApplyRouteMarks replaces the mark table with r's rules in one
// transaction, or removes it when r routes no IP.
func ApplyRouteMarks(r Routing) error {
	rules := markRules(r)
	if len(rules) == 0 {
		return RemoveRouteMarks()
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Name: RouteTableName, Family: nftables.TableFamilyIPv4}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	ch := c.AddChain(&nftables.Chain{Name: "prerouting", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityMangle})
	for _, exprs := range rules {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: installing the Egress routing mark table %s: %w", RouteTableName, err)
	}
	return nil
}

// RemoveRouteMarks deletes the mark table (absent is fine).
func RemoveRouteMarks() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := &nftables.Table{Name: RouteTableName, Family: nftables.TableFamilyIPv4}
	c.AddTable(t)
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: removing %s: %w", RouteTableName, err)
	}
	return nil
}

// markRules are the prerouting chain's rules, in order (none when no IP
// is routed):
//
//	iifname != <gateway> return
//	ct direction reply return
//	ip daddr <kept> return              (each kept IPv4 CIDR)
//	ip saddr <pod> meta mark set mark & ~<mask> | <mark>   (each source of each IP)
func markRules(r Routing) [][]expr.Any {
	var sets [][]expr.Any
	for _, ip := range r.IPs {
		if !ip.IP.Is4() {
			continue
		}
		set := []expr.Any{
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: nftmatch.LE32(^ip.MarkMask), Xor: nftmatch.LE32(ip.Mark & ip.MarkMask)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
		}
		for _, src := range ip.Sources {
			if src.Is4() {
				sets = append(sets, slices.Concat(nftmatch.Prefix(netip.PrefixFrom(src, 32), true), set))
			}
		}
	}
	if len(sets) == 0 {
		return nil
	}
	ret := []expr.Any{&expr.Verdict{Kind: expr.VerdictReturn}}
	out := [][]expr.Any{
		slices.Concat([]expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: nftmatch.IfName(r.Gateway)},
		}, ret),
		slices.Concat([]expr.Any{
			&expr.Ct{Key: expr.CtKeyDIRECTION, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ctDirReply}},
		}, ret),
	}
	for _, k := range r.Keep {
		if k.Addr().Is4() {
			out = append(out, slices.Concat(nftmatch.Prefix(k, false), ret))
		}
	}
	return append(out, sets...)
}

// ctDirReply is conntrack's IP_CT_DIR_REPLY (ct direction is one byte).
const ctDirReply = 1

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
