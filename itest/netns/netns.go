package netns

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"switchyard.dev/switchyard/itest/testenv"
)

// Path is where iproute2 keeps named namespaces.
func Path(name string) string { return "/var/run/netns/" + name }

// Create makes a named namespace with loopback up and removes it on cleanup.
func Create(t testenv.T, name string) string {
	t.Helper()
	if err := Add(name); err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := Delete(name); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	return name
}

// Add creates the named namespace and brings its loopback up.
func Add(name string) error {
	if _, err := os.Stat(Path(name)); err == nil {
		return fmt.Errorf("network namespace %q already exists: a previous run crashed? run `make clean-itest`", name)
	}
	if _, err := testenv.Run("ip", "netns", "add", name); err != nil {
		return fmt.Errorf("creating network namespace %q: %w", name, err)
	}
	testenv.TrackNetNS(name, true)
	if _, err := testenv.Run("ip", "-n", name, "link", "set", "lo", "up"); err != nil {
		return fmt.Errorf("bringing up lo in %q: %w", name, err)
	}
	return nil
}

// Delete removes the named namespace; a namespace that is already gone is
// not an error, so cleanup is idempotent.
func Delete(name string) error {
	if _, err := os.Stat(Path(name)); os.IsNotExist(err) {
		return nil
	}
	// Processes still inside would keep the namespace (and its veths) alive
	// after the bind mount is gone, so they are killed first.
	if out, err := testenv.Run("ip", "netns", "pids", name); err == nil {
		for _, pid := range strings.Fields(out) {
			_, _ = testenv.Run("kill", "-9", pid)
		}
	}
	if _, err := testenv.Run("ip", "netns", "del", name); err != nil {
		return fmt.Errorf("deleting network namespace %q: %w", name, err)
	}
	testenv.TrackNetNS(name, false)
	return nil
}

// Do runs fn inside the named namespace on a locked OS thread.
func Do(name string, fn func() error) error {
	h, err := ns.GetNS(Path(name))
	if err != nil {
		return fmt.Errorf("opening network namespace %q: %w", name, err)
	}
	defer h.Close()
	return h.Do(func(ns.NetNS) error { return fn() })
}

// Exec runs a command inside the namespace and returns its combined output.
func Exec(name string, args ...string) (string, error) {
	return testenv.Run("ip", append([]string{"netns", "exec", name}, args...)...)
}

// List returns the names of all namespaces whose name starts with prefix.
func List(prefix string) ([]string, error) {
	entries, err := os.ReadDir("/var/run/netns")
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Listen opens a listening socket inside the named namespace. The socket
// stays in that namespace for its whole life, whichever thread uses it later,
// which is how the harness serves addresses inside nodes and pods from the
// test process itself.
func Listen(name, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := Do(name, func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s in namespace %q: %w", network, addr, name, err)
	}
	return l, nil
}

// ListenPacket is Listen for datagram sockets.
func ListenPacket(name, network, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := Do(name, func() error {
		var err error
		c, err = net.ListenPacket(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s in namespace %q: %w", network, addr, name, err)
	}
	return c, nil
}

// Dial connects from inside the named namespace.
func Dial(name, network, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := Do(name, func() error {
		var err error
		c, err = net.DialTimeout(network, addr, timeout)
		return err
	})
	return c, err
}
