package netns_test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// TestInterruptCleansUp runs a child test binary that creates a namespace,
// a daemon inside it and a run directory, interrupts it the way Ctrl-C
// would, and checks that nothing of it is left.
func TestInterruptCleansUp(t *testing.T) {
	if os.Getenv("SWITCHYARD_INTERRUPT_CHILD") == "1" {
		child(t)
		return
	}
	testenv.RequireRoot(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestInterruptCleansUp$", "-test.v")
	cmd.Env = append(os.Environ(), "SWITCHYARD_INTERRUPT_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var ns, dir string
	var pid string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "READY" {
			ns, dir, pid = f[1], f[2], f[3]
			break
		}
	}
	if ns == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child never reported READY")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("interrupted child did not exit within 30s")
	}
	// Give the kernel a moment to reap the killed daemon.
	err = testenv.Eventually("the interrupted run's resources to disappear", 5*time.Second, 50*time.Millisecond, func() error {
		if _, err := os.Stat(netns.Path(ns)); err == nil {
			return errorf("namespace %s still exists", ns)
		}
		if _, err := os.Stat(dir); err == nil {
			return errorf("directory %s still exists", dir)
		}
		if b, err := os.ReadFile("/proc/" + pid + "/cmdline"); err == nil && len(b) > 0 {
			return errorf("process %s still runs: %q", pid, b)
		}
		return nil
	})
	if err != nil {
		netns.Delete(ns)
		os.RemoveAll(dir)
		t.Fatal(err)
	}
}

func child(t *testing.T) {
	ns := netns.Create(t, testenv.Name("intr"))
	dir := testenv.Dir(t, "intr")
	p, err := testenv.StartProcess(testenv.ProcessSpec{Name: "sleeper", Path: "sleep", Args: []string{"300"}, NetNS: ns, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("READY " + ns + " " + dir + " " + itoa(p.Pid()) + "\n")
	time.Sleep(60 * time.Second)
	t.Fatalf("child was not interrupted")
}
