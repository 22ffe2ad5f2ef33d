package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Process is a child process started by the harness. Its output goes to a log
// file, and it is killed if the test process dies first (Pdeathsig), so a
// crashed run leaves no daemons behind.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// ProcessSpec says how to start a Process.
type ProcessSpec struct {
	Name  string   // for messages and the log file name
	Path  string   // binary
	Args  []string // arguments
	Env   []string // added to the current environment
	NetNS string   // if set, run inside this named network namespace
	Dir   string   // working directory and home of the log file
}

// StartProcess starts spec and returns once the process has been forked.
func StartProcess(spec ProcessSpec) (*Process, error) {
	logPath := spec.Dir + "/" + spec.Name + ".log"
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log for %s: %w", spec.Name, err)
	}
	path, args := spec.Path, spec.Args
	if spec.NetNS != "" {
		// ip netns exec execs the binary in place, so the pid we hold is the
		// daemon's own and signals reach it directly.
		args = append([]string{"netns", "exec", spec.NetNS, path}, args...)
		path = "ip"
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = spec.Dir
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", spec.Name, spec.Path, err)
	}
	p := &Process{Name: spec.Name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	trackGroup(cmd.Process.Pid, true)
	go func() {
		p.err = cmd.Wait()
		trackGroup(cmd.Process.Pid, false)
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Done is closed when the process ends.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM to the process group, waits up to grace, then SIGKILLs.
// It is safe to call on a process that already exited.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	p.Kill()
}

// Kill sends SIGKILL to the process group and waits for the process to end.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Tail returns the last n lines of the process log, for failure messages.
func (p *Process) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ErrTimeout is returned by Eventually when the condition never held.
var ErrTimeout = errors.New("timed out")

// Eventually polls cond every interval until it returns nil or timeout
// passes; the error then names what was awaited and the last failure.
func Eventually(what string, timeout, interval time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = cond(); last == nil {
			return nil
		}
		var perm permanent
		if errors.As(last, &perm) {
			return perm.err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %s waiting for %s: %v", ErrTimeout, timeout, what, last)
		}
		time.Sleep(interval)
	}
}

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }

// Permanent marks an error from an Eventually condition as final: waiting
// longer cannot help (the awaited process died), so Eventually returns it
// at once, unwrapped.
func Permanent(err error) error { return permanent{err} }

// Run runs a command to completion and returns its combined output; the error
// carries the command line and output so failures read on their own.
func Run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
