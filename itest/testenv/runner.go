package testenv

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
)

// Runner implements T for programs (the demo) rather than tests: Fatalf
// prints the message, runs every cleanup in reverse order and exits 1, and
// SIGINT/SIGTERM run the cleanups too, so Ctrl-C leaves nothing behind.
type Runner struct {
	mu       sync.Mutex
	cleanups []func()
	done     bool
}

// NewRunner returns a Runner with its signal handler installed.
func NewRunner() *Runner {
	r := &Runner{}
	trackMu.Lock()
	programRunner = true
	trackMu.Unlock()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "\n%s: cleaning up\n", s)
		r.Close()
		os.Exit(130)
	}()
	return r
}

func (r *Runner) Helper() {}

func (r *Runner) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (r *Runner) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", args...)
	r.Close()
	os.Exit(1)
}

func (r *Runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// Close runs every registered cleanup, last registered first. Only the first
// call does anything.
func (r *Runner) Close() {
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return
	}
	r.done = true
	fns := r.cleanups
	r.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
	runtime.Gosched()
}
