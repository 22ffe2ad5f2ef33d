package underlay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"switchyard.dev/switchyard/host/unixctl"
)

// Why ovs-vswitchd's tunnel routes are mirrored rather than learned.
//
// On the netdev datapath ovs-vswitchd routes tunnel packets with its own
// table, and it knows which addresses end tunnels (so that it decapsulates
// what arrives for them) from the devices that table's routes leave
// through. When it learns that table from the kernel, it throws the whole
// table away and reads it again on every link event in its network
// namespace, and with it, for a moment, the node IP's tunnel endpoint. A
// tunnel packet that arrives in that moment is handed to the kernel as
// plain UDP and lost, so every pod created or deleted on the node (a
// veth pair comes and goes) cost other pods' cross-node traffic a packet
// now and then. Started with --disable-system-route (switchyard-ovs does
// that) ovs-vswitchd keeps only the routes it is given, and no link event
// touches them; the mirror gives it the kernel's routes through the
// underlay bridge, and follows their changes.

// Route is one entry of ovs-vswitchd's routing table.
type Route struct {
	Prefix  netip.Prefix
	Gateway netip.Addr // invalid for an on-link route
	Dev     string
}

func (r Route) String() string {
	if r.Gateway.IsValid() {
		return fmt.Sprintf("%s via %s dev %s", r.Prefix, r.Gateway, r.Dev)
	}
	return fmt.Sprintf("%s dev %s", r.Prefix, r.Dev)
}

// args are ovs/route/add's arguments for r.
func (r Route) args() []string {
	a := []string{r.Prefix.String(), r.Dev}
	if r.Gateway.IsValid() {
		a = append(a, r.Gateway.String())
	}
	return a
}

// RouteTable is ovs-vswitchd's routing table as ovs/route/show prints it:
// the routes it was given (User) and those it learned from the kernel
// (Cached), which exist only while it reads the kernel's table.
type RouteTable struct {
	User, Cached []Route
}

// ParseRouteTable reads ovs/route/show's answer, lines such as
//
//	User: 10.0.0.0/24 dev br-phy SRC 10.0.0.1
//	Cached: 0.0.0.0/0 dev br-phy GW 10.0.0.254 SRC 10.0.0.1
//
// Routes with a packet mark are left out: the mirror neither makes nor
// owns any.
func ParseRouteTable(s string) (RouteTable, error) {
	var t RouteTable
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line == "Route Table:" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || (f[0] != "User:" && f[0] != "Cached:") {
			return RouteTable{}, fmt.Errorf("ovs/route/show line %d: %q is not a route", i+1, line)
		}
		p, err := netip.ParsePrefix(f[1])
		if err != nil {
			return RouteTable{}, fmt.Errorf("ovs/route/show line %d: %w", i+1, err)
		}
		r, marked := Route{Prefix: p.Masked()}, false
		for k := 2; k < len(f); k++ {
			if k+1 >= len(f) {
				break // "local", or a word this parser does not know
			}
			switch f[k] {
			case "dev":
				r.Dev = f[k+1]
			case "GW":
				if r.Gateway, err = netip.ParseAddr(f[k+1]); err != nil {
					return RouteTable{}, fmt.Errorf("ovs/route/show line %d: gateway: %w", i+1, err)
				}
			case "MARK":
				marked = true
			default:
				continue
			}
			k++
		}
		if r.Dev == "" {
			return RouteTable{}, fmt.Errorf("ovs/route/show line %d: %q names no device", i+1, line)
		}
		if marked {
			continue
		}
		if f[0] == "User:" {
			t.User = append(t.User, r)
		} else {
			t.Cached = append(t.Cached, r)
		}
	}
	return t, nil
}

// PlanRoutes compares the routes ovs-vswitchd holds for dev with those it
// should hold, and returns what to delete and then what to add (or
// replace: ovs/route/add replaces a route with the same prefix).
//
// Deleting any route through dev also makes ovs-vswitchd forget that
// dev's addresses end tunnels, until a route through dev is added again.
// So after a delete every wanted route is added again, not only the new
// ones.
func PlanRoutes(dev string, want, have []Route) (del, add []Route) {
	held := map[netip.Prefix]Route{}
	for _, r := range have {
		held[r.Prefix] = r
	}
	wanted := map[netip.Prefix]bool{}
	for _, r := range want {
		wanted[r.Prefix] = true
	}
	for _, r := range have {
		if r.Dev == dev && !wanted[r.Prefix] {
			del = append(del, r)
		}
	}
	for _, r := range want {
		if h, ok := held[r.Prefix]; !ok || h != r || len(del) > 0 {
			add = append(add, r)
		}
	}
	return del, add
}

// KernelRoutes are the main table's unicast routes through the device
// dev, as ovs-vswitchd routes: a default route as 0.0.0.0/0 (or ::/0),
// IPv6 link-local routes left out (no tunnel goes there).
func KernelRoutes(dev string) ([]Route, error) {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("underlay: bridge interface %q: %w", dev, err)
	}
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_ALL,
		&netlink.Route{LinkIndex: l.Attrs().Index, Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("underlay: listing the routes of %s: %w", dev, err)
	}
	var out []Route
	for _, r := range rs {
		if route, ok := fromKernel(dev, r); ok {
			out = append(out, route)
		}
	}
	return out, nil
}

func fromKernel(dev string, r netlink.Route) (Route, bool) {
	if r.Type != unix.RTN_UNICAST || len(r.MultiPath) > 0 {
		return Route{}, false
	}
	var p netip.Prefix
	if r.Dst == nil {
		p = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if r.Family == unix.AF_INET6 {
			p = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
	} else {
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			return Route{}, false
		}
		ones, _ := r.Dst.Mask.Size()
		p = netip.PrefixFrom(a.Unmap(), ones).Masked()
	}
	if p.Addr().IsLinkLocalUnicast() || p.Addr().IsMulticast() {
		return Route{}, false
	}
	out := Route{Prefix: p, Dev: dev}
	if r.Gw != nil {
		gw, ok := netip.AddrFromSlice(r.Gw)
		if !ok {
			return Route{}, false
		}
		out.Gateway = gw.Unmap()
	}
	return out, true
}

// Neighbor is one entry of ovs-vswitchd's tunnel neighbour cache.
type Neighbor struct {
	IP  netip.Addr
	MAC string // lower case, as net.HardwareAddr prints it
	Dev string
	// Stale entries are kept but not used: the next tunnel packet to IP
	// is dropped while ovs-vswitchd asks for its MAC again.
	Stale bool
}

// ParseNeighbors reads tnl/neigh/show's answer: a header, a rule, then
//
//	198.18.0.2                                    0a:58:c6:12:00:02   br-phy
//
// with STALE after an expired entry.
func ParseNeighbors(s string) ([]Neighbor, error) {
	var out []Neighbor
	for i, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "IP" || strings.HasPrefix(f[0], "=") {
			continue
		}
		if len(f) < 3 || len(f) > 4 || (len(f) == 4 && f[3] != "STALE") {
			return nil, fmt.Errorf("tnl/neigh/show line %d: %q is not a neighbour", i+1, line)
		}
		ip, err := netip.ParseAddr(f[0])
		if err != nil {
			return nil, fmt.Errorf("tnl/neigh/show line %d: %w", i+1, err)
		}
		mac, err := net.ParseMAC(f[1])
		if err != nil {
			return nil, fmt.Errorf("tnl/neigh/show line %d: %w", i+1, err)
		}
		out = append(out, Neighbor{IP: ip.Unmap(), MAC: mac.String(), Dev: f[2], Stale: len(f) == 4})
	}
	return out, nil
}

// Unresolved returns the addresses in known that ovs-vswitchd holds no
// usable neighbour entry for on dev.
func Unresolved(dev string, known map[netip.Addr]bool, held []Neighbor) []netip.Addr {
	have := map[netip.Addr]bool{}
	for _, n := range held {
		if n.Dev == dev && !n.Stale {
			have[n.IP] = true
		}
	}
	var out []netip.Addr
	for ip := range known {
		if !have[ip] {
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// resolve asks the kernel to resolve ip's MAC on dev now (a neighbour
// update with NTF_USE sends the ARP request or neighbour solicitation
// with no packet waiting). The reply passes through the bridge, and
// ovs-vswitchd learns the neighbour from it; so not before ovs-vswitchd
// has the bridge's interface open (it has carrier then): a request sent
// earlier goes nowhere, and the kernel asks again only a second later.
func resolve(dev string, ip netip.Addr) error {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("underlay: bridge interface %q: %w", dev, err)
	}
	if l.Attrs().RawFlags&unix.IFF_LOWER_UP == 0 {
		return fmt.Errorf("underlay: %s has no carrier yet (ovs-vswitchd has not opened it)", dev)
	}
	fam := netlink.FAMILY_V4
	if ip.Is6() {
		fam = netlink.FAMILY_V6
	}
	if err := netlink.NeighSet(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: fam, IP: net.IP(ip.AsSlice()), Flags: netlink.NTF_USE}); err != nil {
		return fmt.Errorf("underlay: resolving %s on %s: %w", ip, dev, err)
	}
	return nil
}

// Mirror keeps ovs-vswitchd's routes through the underlay bridge equal to
// the kernel's. It also remembers the neighbours ovs-vswitchd knew there
// (the peers' MACs), and has the kernel resolve them again for a new
// ovs-vswitchd: that one starts with none, the kernel lost its own when
// the bridge's interface went down with the old one, and a tunnel packet
// that finds no neighbour entry is dropped while ovs-vswitchd asks.
type Mirror struct {
	// Bridge is the underlay bridge (its interface holds the node IP).
	Bridge string
	// RunDir is ovs-vswitchd's run directory, where its control socket is.
	RunDir string
	Log    *slog.Logger
	// Every is how often the mirror checks ovs-vswitchd's tables with no
	// event to prompt it, a safety net: kernel route events and the loss
	// of ovs-vswitchd's control socket (a restart) prompt it at once.
	// Default 5s.
	Every time.Duration

	conn *unixctl.Client
	// lost is closed when the ovs-vswitchd behind sock exits.
	lost      <-chan struct{}
	stopWatch func()
	warnedOwn bool
	// known are the neighbours on Bridge that some ovs-vswitchd held;
	// pending, those being resolved again for a new one, until when.
	known   map[netip.Addr]bool
	pending map[netip.Addr]time.Time
	// failingSince is when Sync began to fail (zero while it works).
	failingSince time.Time
	warnedFail   bool
}

const (
	// retryEvery paces Sync while it fails or neighbours are pending: an
	// ovs-vswitchd that restarts answers on its socket a little before
	// its bridges forward, and the tunnel is down until both are done.
	retryEvery = 50 * time.Millisecond
	// resolveFor is how long a new ovs-vswitchd's neighbours are asked
	// for before the mirror gives up on one (a peer that left meanwhile).
	resolveFor = 5 * time.Second
	// warnAfter is how long Sync may fail before the mirror warns (an
	// ovs-vswitchd restart takes about a second).
	warnAfter = 3 * time.Second
)

// Run mirrors until ctx ends: now, on every kernel route event, as soon
// as a restarted ovs-vswitchd answers, and every Every. (New neighbours
// need no event: ovs-vswitchd sees the ARP that resolves them pass
// through the bridge and learns them itself.)
func (m *Mirror) Run(ctx context.Context) {
	if m.Every == 0 {
		m.Every = 5 * time.Second
	}
	events := make(chan netlink.RouteUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	if err := netlink.RouteSubscribeWithOptions(events, done, netlink.RouteSubscribeOptions{
		ErrorCallback: func(err error) {
			m.Log.Warn("kernel route events lost; the mirror relies on its periodic check", "every", m.Every, "error", err)
		},
	}); err != nil {
		m.Log.Warn("cannot follow kernel route events; the mirror relies on its periodic check", "every", m.Every, "error", err)
		events = nil
	}
	defer m.disconnect()
	for {
		err := m.Sync(ctx)
		if ctx.Err() != nil {
			return
		}
		m.report(err)
		wait := m.Every
		if err != nil || len(m.pending) > 0 {
			wait = retryEvery
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case _, ok := <-events:
			if !ok {
				events = nil
				break
			}
			// A change comes as several events (an address brings its
			// prefix route and its local route): take them as one.
			drain(events, 20*time.Millisecond)
		case <-m.lost:
			m.Log.Info("ovs-vswitchd's control socket closed; mirroring into the next one as soon as it answers", "bridge", m.Bridge)
			m.disconnect()
		case <-timer.C:
		}
		timer.Stop()
	}
}

func drain(events <-chan netlink.RouteUpdate, quiet time.Duration) {
	t := time.NewTimer(quiet)
	defer t.Stop()
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
			t.Reset(quiet)
		case <-t.C:
			return
		}
	}
}

// report logs a failing mirror once it has failed for warnAfter, and its
// recovery after that.
func (m *Mirror) report(err error) {
	switch {
	case err == nil:
		if m.warnedFail {
			m.Log.Info("underlay routes mirrored into ovs-vswitchd again", "bridge", m.Bridge, "after", time.Since(m.failingSince).Round(time.Millisecond))
		}
		m.failingSince, m.warnedFail = time.Time{}, false
	case m.failingSince.IsZero():
		m.failingSince = time.Now()
		m.Log.Debug("could not mirror the underlay routes into ovs-vswitchd; retrying", "bridge", m.Bridge, "error", err)
	case !m.warnedFail && time.Since(m.failingSince) > warnAfter:
		m.warnedFail = true
		m.Log.Warn("could not mirror the underlay routes into ovs-vswitchd; tunnel packets neither leave nor arrive until it succeeds (retrying)",
			"bridge", m.Bridge, "for", time.Since(m.failingSince).Round(time.Millisecond), "error", err)
	}
}

func (m *Mirror) disconnect() {
	if m.stopWatch != nil {
		m.stopWatch()
		m.stopWatch, m.lost = nil, nil
	}
	if m.conn != nil {
		m.conn.Close()
		m.conn = nil
	}
}

// connect dials ovs-vswitchd's control socket, and a second connection to
// it that carries nothing but closes (lost) when that ovs-vswitchd exits.
func (m *Mirror) connect(ctx context.Context) error {
	sock, err := unixctl.Find(m.RunDir, "ovs-vswitchd")
	if err != nil {
		return err
	}
	conn, err := unixctl.Dial(ctx, sock)
	if err != nil {
		return err
	}
	var d net.Dialer
	w, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		conn.Close()
		return fmt.Errorf("unixctl: %w", err)
	}
	lost := make(chan struct{})
	go func() {
		defer close(lost)
		// ovs-vswitchd never writes unasked: Read returns when it exits
		// (or when stopWatch closes w).
		_, _ = w.Read(make([]byte, 1))
	}()
	m.conn, m.lost = conn, lost
	m.stopWatch = func() { w.Close() }
	return nil
}

// Sync brings ovs-vswitchd's routes through the bridge in line with the
// kernel's once, and asks again for the neighbours a new ovs-vswitchd
// lacks.
func (m *Mirror) Sync(ctx context.Context) error {
	routes, err := KernelRoutes(m.Bridge)
	if err != nil {
		return err
	}
	if err := m.sync(ctx, routes); err != nil {
		// A dead or restarted ovs-vswitchd: reconnect next time.
		if !errors.Is(err, unixctl.ErrCommand) {
			m.disconnect()
		}
		return err
	}
	return nil
}

func (m *Mirror) sync(ctx context.Context, routes []Route) error {
	reconnected := m.conn == nil
	if reconnected {
		if err := m.connect(ctx); err != nil {
			return err
		}
	}
	// Neighbours first: a tunnel packet needs both, and one that finds
	// its route but not its MAC is dropped.
	out, err := m.conn.Call(ctx, "tnl/neigh/show")
	if err != nil {
		return err
	}
	held, err := ParseNeighbors(out)
	if err != nil {
		return err
	}
	m.resolveMissing(reconnected, held)
	if out, err = m.conn.Call(ctx, "ovs/route/show"); err != nil {
		return err
	}
	table, err := ParseRouteTable(out)
	if err != nil {
		return err
	}
	if !m.warnedOwn && slices.ContainsFunc(table.Cached, func(r Route) bool { return r.Dev == m.Bridge }) {
		m.warnedOwn = true
		m.Log.Warn("ovs-vswitchd reads the kernel's routes itself (it was started without --disable-system-route): it forgets "+
			"the node's tunnel endpoint for a moment on every link change on this node, and tunnel packets arriving then are lost; "+
			"start it with --disable-system-route, as switchyard-ovs does", "bridge", m.Bridge)
	}
	del, add := PlanRoutes(m.Bridge, routes, table.User)
	for _, r := range del {
		if _, err := m.conn.Call(ctx, "ovs/route/del", r.Prefix.String()); err != nil {
			return fmt.Errorf("deleting route %s: %w", r, err)
		}
		m.Log.Info("route removed from ovs-vswitchd", "bridge", m.Bridge, "route", r.String())
	}
	for _, r := range add {
		if _, err := m.conn.Call(ctx, "ovs/route/add", r.args()...); err != nil {
			return fmt.Errorf("adding route %s: %w", r, err)
		}
		m.Log.Info("route mirrored into ovs-vswitchd", "bridge", m.Bridge, "route", r.String())
	}
	return nil
}

// resolveMissing records the neighbours ovs-vswitchd holds and, after a
// reconnect (perhaps to a new ovs-vswitchd), has the kernel resolve those
// it lacks, again on every Sync until it holds them or resolveFor passes:
// the first requests may go out before the new ovs-vswitchd forwards the
// replies.
func (m *Mirror) resolveMissing(reconnected bool, held []Neighbor) {
	if m.known == nil {
		m.known, m.pending = map[netip.Addr]bool{}, map[netip.Addr]time.Time{}
	}
	now := time.Now()
	if reconnected {
		for _, ip := range Unresolved(m.Bridge, m.known, held) {
			m.pending[ip] = now.Add(resolveFor)
		}
	}
	for _, n := range held {
		if n.Dev != m.Bridge {
			continue
		}
		if n.Stale {
			delete(m.known, n.IP)
		} else {
			m.known[n.IP] = true
			delete(m.pending, n.IP)
		}
	}
	for ip, until := range m.pending {
		if now.After(until) {
			delete(m.pending, ip)
			m.Log.Warn("ovs-vswitchd did not learn a tunnel peer's MAC; its next packet will be dropped while ovs-vswitchd asks", "bridge", m.Bridge, "ip", ip)
			continue
		}
		if err := resolve(m.Bridge, ip); err != nil {
			m.Log.Debug("could not have a tunnel peer's MAC resolved yet", "bridge", m.Bridge, "ip", ip, "error", err)
		}
	}
}
