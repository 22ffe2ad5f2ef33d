package agent

import (
	"os/exec"
	"testing"
	"time"
)

// TestProcessExit: the channel closes when the process exits (killed, or
// on its own), and not while it runs; release ends the watch.
func TestProcessExit(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		kill bool
	}{
		{"killed", []string{"sleep", "60"}, true},
		{"exits by itself", []string{"sleep", "0.2"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(c.args[0], c.args[1:]...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			t.Cleanup(func() { cmd.Process.Kill(); <-done })
			exited, release, ok := processExit(cmd.Process.Pid)
			if !ok {
				t.Fatal("no pidfd on this kernel (Linux 5.10+ needed); the supervisor would poll")
			}
			defer release()
			select {
			case <-exited:
				t.Fatal("reported exited while the process runs")
			case <-time.After(50 * time.Millisecond):
			}
			if c.kill {
				cmd.Process.Kill()
			}
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				t.Fatal("exit not reported within 5 s")
			}
		})
	}
	t.Run("released while running", func(t *testing.T) {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		exited, release, ok := processExit(cmd.Process.Pid)
		if !ok {
			t.Fatal("no pidfd")
		}
		release()
		select {
		case <-exited:
			t.Fatal("a released watch reported an exit")
		case <-time.After(100 * time.Millisecond):
		}
	})
	if _, _, ok := processExit(0); ok {
		t.Error("pid 0 gave a watch")
	}
}
