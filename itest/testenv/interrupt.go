package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
)

// The testing package runs no t.Cleanup when the test binary is interrupted
// (Ctrl-C, or SIGTERM from a CI runner), so the harness keeps its own record
// of what it created and, on such a signal, removes it before exiting:
// process groups are killed and namespaces and run directories removed.
// Child processes would die with the test anyway (Pdeathsig), but namespaces
// and directories would not.

var (
	trackMu   sync.Mutex
	trackOnce sync.Once
	groups    = map[int]struct{}{}
	netnsSet  = map[string]struct{}{}
	dirs      = map[string]struct{}{}
)

// programRunner is set when a Runner (the demo) handles signals itself and
// runs its own cleanups in order.
var programRunner bool

func installInterruptHandler() {
	trackOnce.Do(func() {
		if programRunner {
			return
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			s := <-sig
			fmt.Fprintf(os.Stderr, "switchyard harness: %s: removing this run's processes, namespaces and directories\n", s)
			emergencyCleanup()
			os.Exit(130)
		}()
	})
}

func emergencyCleanup() {
	trackMu.Lock()
	defer trackMu.Unlock()
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	for ns := range netnsSet {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
	for d := range dirs {
		_ = os.RemoveAll(d)
	}
}

func track[K comparable](m map[K]struct{}, k K, add bool) {
	installInterruptHandler()
	trackMu.Lock()
	defer trackMu.Unlock()
	if add {
		m[k] = struct{}{}
	} else {
		delete(m, k)
	}
}

// TrackNetNS records (add) or forgets a namespace for interrupt cleanup.
func TrackNetNS(name string, add bool) { track(netnsSet, name, add) }

func trackGroup(pgid int, add bool) { track(groups, pgid, add) }

func trackDir(dir string, add bool) { track(dirs, dir, add) }
