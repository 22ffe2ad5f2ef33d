package netns_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"switchyard.dev/switchyard/itest/netns"
	"switchyard.dev/switchyard/itest/testenv"
)

// `make clean-itest` must remove a dead run's namespaces and directories and
// leave a live run's alone, so running it never disturbs another test.
func TestCleanItestSparesLiveRuns(t *testing.T) {
	testenv.RequireRoot(t)
	script, err := testenv.SourceDir("scripts/clean-itest.sh")
	if err != nil {
		t.Fatal(err)
	}
	live := netns.Create(t, testenv.Name("live"))

	// A run whose owner process has exited: our own child, already reaped.
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	deadRun := "sytdead" + testenv.RunID()[:2]
	deadNS := deadRun + "-crashed"
	deadDir := filepath.Join(testenv.BaseDir, deadRun+"-n1-123")
	owner := filepath.Join(testenv.BaseDir, "owner-"+deadRun)
	if err := netns.Add(deadNS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netns.Delete(deadNS); os.RemoveAll(deadDir); os.Remove(owner) })
	if err := os.MkdirAll(deadDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(owner, []byte(itoa(c.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	if out, err := exec.Command("bash", script).CombinedOutput(); err != nil {
		t.Fatalf("clean-itest: %v\n%s", err, out)
	}
	if _, err := os.Stat(netns.Path(live)); err != nil {
		t.Errorf("clean-itest removed the live run's namespace %s", live)
	}
	if _, err := os.Stat(netns.Path(deadNS)); err == nil {
		t.Errorf("clean-itest left the dead run's namespace %s", deadNS)
	}
	if _, err := os.Stat(deadDir); err == nil {
		t.Errorf("clean-itest left the dead run's directory %s", deadDir)
	}
}
