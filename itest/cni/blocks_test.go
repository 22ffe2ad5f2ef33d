package cni

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
	"switchyard.dev/switchyard/plugins/podnet/veth"
)

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// vethEnv is a node namespace (where the plugin would run) and a pod one.
func vethEnv(t *testing.T, role string) (node, pod string, cfg veth.Config) {
	t.Helper()
	testenv.RequireRoot(t)
	node = netns.Create(t, testenv.Name(role+"n"))
	pod = netns.Create(t, testenv.Name(role+"p"))
	cfg = veth.Config{
		Netns: netns.Path(pod), IfName: "eth0", HostIfName: testenv.Name(role + "h"), MTU: 1400,
		MAC:      mustMAC("0a:58:0a:f4:01:05"),
		Addrs:    []netip.Addr{netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00:10:244:1::5")},
		Gateways: []netip.Addr{netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("fd00:10:244:1::1")},
	}
	return node, pod, cfg
}

func inNode(t *testing.T, node string, fn func() error) {
	t.Helper()
	if err := netns.Do(node, fn); err != nil {
		t.Fatal(err)
	}
}

func TestVethSetupCheckTeardown(t *testing.T) {
	node, pod, cfg := vethEnv(t, "v")
	inNode(t, node, func() error { _, err := veth.Setup(cfg); return err })

	// Independent witnesses: iproute2 inside the pod and the node.
	addrs, _ := netns.Exec(pod, "ip", "-o", "addr", "show", "dev", "eth0")
	for _, want := range []string{"10.244.1.5/32", "fd00:10:244:1::5/128", "link/ether 0a:58:0a:f4:01:05"} {
		if want[0] == 'l' {
			link, _ := netns.Exec(pod, "ip", "-o", "link", "show", "dev", "eth0")
			if !strings.Contains(link, want) || !strings.Contains(link, "mtu 1400") {
				t.Errorf("pod link %q lacks %q / mtu 1400", link, want)
			}
			continue
		}
		if !strings.Contains(addrs, want) {
			t.Errorf("pod addresses %q lack %s", addrs, want)
		}
	}
	routes, _ := netns.Exec(pod, "ip", "route")
	routes6, _ := netns.Exec(pod, "ip", "-6", "route")
	for _, want := range []string{"default via 10.244.1.1 dev eth0", "10.244.1.1 dev eth0 scope link"} {
		if !strings.Contains(routes, want) {
			t.Errorf("pod IPv4 routes %q lack %q", routes, want)
		}
	}
	if !strings.Contains(routes6, "default via fd00:10:244:1::1 dev eth0") {
		t.Errorf("pod IPv6 routes %q lack the default route", routes6)
	}
	// The host end is up, with a carrier, ARP and promiscuous mode set and
	// no IPv6 address: nothing about it is left to change once the switch
	// attaches it.
	if out, err := netns.Exec(node, "ip", "-o", "link", "show", cfg.HostIfName); err != nil ||
		!strings.Contains(out, "NOARP,PROMISC,UP,LOWER_UP") {
		t.Errorf("host end %s in node: %q %v, want NOARP,PROMISC,UP,LOWER_UP", cfg.HostIfName, out, err)
	}
	if out, err := netns.Exec(node, "ip", "-o", "-6", "addr", "show", "dev", cfg.HostIfName); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("host end %s has IPv6 addresses %q (%v), want none", cfg.HostIfName, out, err)
	}

	var problems []string
	inNode(t, node, func() error { problems = veth.Check(cfg); return nil })
	if len(problems) != 0 {
		t.Errorf("Check after Setup reports %q, want nothing", problems)
	}

	// Out of band: the pod's interface disappears (and with it the peer).
	if out, err := netns.Exec(pod, "ip", "link", "del", "eth0"); err != nil {
		t.Fatalf("deleting eth0: %v %s", err, out)
	}
	inNode(t, node, func() error { problems = veth.Check(cfg); return nil })
	want := []string{"host end " + cfg.HostIfName + " does not exist", "interface eth0 does not exist in the pod"}
	if diff := cmp.Diff(want, problems); diff != "" {
		t.Errorf("Check after out-of-band delete (-want +got):\n%s", diff)
	}

	// Teardown is idempotent, also once the netns is gone.
	inNode(t, node, func() error { return veth.Teardown(cfg.Netns, cfg.IfName, cfg.HostIfName) })
	if err := netns.Delete(pod); err != nil {
		t.Fatal(err)
	}
	inNode(t, node, func() error { return veth.Teardown(cfg.Netns, cfg.IfName, cfg.HostIfName) })
}

func TestVethSetupFailureLeavesNothing(t *testing.T) {
	node, pod, cfg := vethEnv(t, "f")
	// A stale interface holds the host-side name.
	if out, err := netns.Exec(node, "ip", "link", "add", cfg.HostIfName, "type", "veth", "peer", "name", cfg.HostIfName+"x"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	var err error
	inNode(t, node, func() error { _, err = veth.Setup(cfg); return nil })
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("Setup over a stale host interface: err = %v, want 'already exists'", err)
	}
	if out, _ := netns.Exec(pod, "ip", "-o", "link"); strings.Contains(out, "eth0") {
		t.Errorf("failed Setup left eth0 in the pod: %s", out)
	}
	// A request the kernel refuses (a multicast MAC) leaves nothing either.
	netns.Exec(node, "ip", "link", "del", cfg.HostIfName)
	bad := cfg
	bad.MAC = mustMAC("01:00:5e:00:00:01")
	inNode(t, node, func() error { _, err = veth.Setup(bad); return nil })
	if err == nil {
		t.Fatal("Setup with a multicast MAC succeeded")
	}
	if out, _ := netns.Exec(node, "ip", "-o", "link"); strings.Contains(out, cfg.HostIfName) {
		t.Errorf("failed Setup left %s in the node: %s", cfg.HostIfName, out)
	}
}

func TestGratuitousARPIsSent(t *testing.T) {
	node, _, cfg := vethEnv(t, "g")
	inNode(t, node, func() error { _, err := veth.Setup(cfg); return err })
	// Listen on the host end with a packet socket, as the switch would.
	var fd int
	inNode(t, node, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ARP)))
		if err != nil {
			return err
		}
		link, err := net.InterfaceByName(cfg.HostIfName)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: link.Index})
	})
	defer unix.Close(fd)
	tv := unix.NsecToTimeval((5 * time.Second).Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)

	ip := netip.MustParseAddr("10.244.1.5")
	inNode(t, node, func() error { return veth.GratuitousARP(cfg.Netns, cfg.IfName, cfg.MAC, ip) })
	want := veth.ARPAnnouncement(cfg.MAC, ip)
	buf := make([]byte, 1500)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			t.Fatalf("no gratuitous ARP seen on %s within 5s: %v", cfg.HostIfName, err)
		}
		// The kernel may also send its own ARP/ND traffic; find ours.
		if n >= len(want) && bytes.Equal(buf[:len(want)], want) {
			return
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
