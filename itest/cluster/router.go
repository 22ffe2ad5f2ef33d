package cluster

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// RoutedExternal is a host the nodes reach only through a router: the
// router sits on the underlay fabric (the same L2 as the nodes) with an
// address in a second subnet, Gateway, and the server sits behind it on a
// link of its own with a default route via the router. The nodes have no
// address in Gateway's subnet and no route to the server's, so what
// reaches the server from a node went through Gateway on purpose (an
// ExternalIPPool's subnetInfo).
type RoutedExternal struct {
	// RouterNS is the router's namespace; its fabric leg is eth0 and its
	// server leg eth1.
	RouterNS string
	// Gateway is the router's address on the fabric, in Subnet.
	Gateway netip.Addr
	Subnet  netip.Prefix
	// ServerNS and ServerIP are the host behind the router.
	ServerNS string
	ServerIP net.IP
}

// AddRoutedExternal creates a router holding gateway (such as
// 198.18.1.1/24) on the fabric and, behind it, a server holding server
// (such as 203.0.113.10/24, the router taking the subnet's first
// address). Both namespaces, and with them their links, are removed on
// cleanup.
func (c *Cluster) AddRoutedExternal(t testenv.T, gateway, server string) *RoutedExternal {
	t.Helper()
	gw, err := netip.ParsePrefix(gateway)
	if err != nil || !gw.Addr().Is4() {
		t.Fatalf("AddRoutedExternal: gateway %q is not an IPv4 address with a prefix length (198.18.1.1/24)", gateway)
	}
	srv, err := netip.ParsePrefix(server)
	if err != nil || !srv.Addr().Is4() || srv.Bits() > 30 {
		t.Fatalf("AddRoutedExternal: server %q is not an IPv4 address in a subnet of at least 4 addresses (203.0.113.10/24)", server)
	}
	routerSide := srv.Masked().Addr().Next()
	if routerSide == srv.Addr() {
		t.Fatalf("AddRoutedExternal: server %s takes the address the router uses on the server's subnet; pick another", srv)
	}
	g4, s4 := gw.Addr().As4(), srv.Addr().As4()
	r := &RoutedExternal{Gateway: gw.Addr(), Subnet: gw.Masked(), ServerIP: net.IP(s4[:])}
	r.RouterNS = netns.Create(t, testenv.Name(fmt.Sprintf("rtr%d-%d", g4[2], g4[3])))
	r.ServerNS = netns.Create(t, testenv.Name(fmt.Sprintf("srv%d-%d", s4[2], s4[3])))

	// Fabric leg: a port of the fabric bridge, named after the gateway
	// (unique among the fabric's ports: nodes are n<i>, externals x<i>).
	port := fmt.Sprintf("r%d-%d", g4[2], g4[3])
	run(t, "ip", "link", "add", "eth0", "netns", r.RouterNS, "type", "veth", "peer", "name", port, "netns", c.Fabric)
	run(t, "ip", "-n", c.Fabric, "link", "set", port, "master", "fabric", "up")
	run(t, "ip", "-n", r.RouterNS, "addr", "add", gw.String(), "dev", "eth0")
	run(t, "ip", "-n", r.RouterNS, "link", "set", "eth0", "up")
	// Server leg.
	run(t, "ip", "link", "add", "eth1", "netns", r.RouterNS, "type", "veth", "peer", "name", "eth0", "netns", r.ServerNS)
	run(t, "ip", "-n", r.RouterNS, "addr", "add", netip.PrefixFrom(routerSide, srv.Bits()).String(), "dev", "eth1")
	run(t, "ip", "-n", r.RouterNS, "link", "set", "eth1", "up")
	run(t, "ip", "-n", r.ServerNS, "addr", "add", srv.String(), "dev", "eth0")
	run(t, "ip", "-n", r.ServerNS, "link", "set", "eth0", "up")
	run(t, "ip", "-n", r.ServerNS, "route", "add", "default", "via", routerSide.String())
	if err := netns.Do(r.RouterNS, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	}); err != nil {
		t.Fatalf("router %s: enabling forwarding: %v", r.RouterNS, err)
	}
	return r
}
