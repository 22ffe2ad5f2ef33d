package cluster

import (
	"io"
	"net"
	"sync"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// Forward makes target (an address reachable from the test process, such as
// the apiserver on the root namespace's loopback) reachable from inside the
// named namespace at listenAddr. Processes in a node talk to the control
// plane this way, with no interface or route added to the root namespace.
func Forward(t testenv.T, ns, listenAddr, target string) string {
	t.Helper()
	l, err := netns.Listen(ns, "tcp", listenAddr)
	if err != nil {
		t.Fatalf("forwarding %s into %s: %v", target, ns, err)
	}
	Relay(t, l, func(in net.Conn) net.Conn {
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			return nil
		}
		return out
	})
	return l.Addr().String()
}

// Relay accepts on l until the test ends and joins each connection to the
// one dial returns for it (dial may first read a handshake from it, such as
// a proxy request; nil: dial closed it and there is nothing to join). At
// cleanup it closes l and every open connection and waits for its
// goroutines.
func Relay(t testenv.T, l net.Listener, dial func(in net.Conn) net.Conn) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = struct{}{}
		} else {
			delete(conns, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			track(in, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer track(in, false)
				out := dial(in)
				if out == nil {
					return
				}
				track(out, true)
				pipe(in, out)
				track(out, false)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// pipe copies both ways until either side ends, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src) // a reset peer simply ends the stream
		if c, ok := dst.(interface{ CloseWrite() error }); ok {
			c.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
	a.Close()
	b.Close()
}
