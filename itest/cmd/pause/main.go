// Command pause is the pod sandbox process of the harness's real nodes: it
// holds the pod's namespaces open and does nothing else. It sleeps until
// SIGTERM or SIGINT and reaps any child that is re-parented to it (it is
// PID 1 of the pod when the pod shares its PID namespace). It is built
// static and packed into the local registry.k8s.io/pause image by
// itest/realnode, since no registry is reachable here.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// One SIGCHLD can stand for several exits; reap until none is left.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
