package cluster

import (
	"errors"
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
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			track(in, true)
			track(out, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				pipe(in, out)
				track(in, false)
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
	return l.Addr().String()
}

// pipe copies both ways until either side closes.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			_ = err // a reset peer simply ends the stream
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
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
