package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestPruneOwnerFiles(t *testing.T) {
	RunID() // ensures BaseDir exists
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pid := []byte(strconv.Itoa(dead.Process.Pid) + "\n")
	cases := []struct {
		run      string
		leftover bool // a run directory is still there
		wantKept bool
	}{
		{run: "dead01", leftover: false, wantKept: false},
		{run: "dead02", leftover: true, wantKept: true},
	}
	for _, c := range cases {
		owner := ownerFile(c.run)
		if err := os.WriteFile(owner, pid, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(owner) })
		if c.leftover {
			d := filepath.Join(BaseDir, Prefix+c.run+"-n1-1")
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	pruneOwnerFiles()
	for _, c := range cases {
		_, err := os.Stat(ownerFile(c.run))
		if kept := err == nil; kept != c.wantKept {
			t.Errorf("run %s (leftover=%v): owner file kept=%v, want %v", c.run, c.leftover, kept, c.wantKept)
		}
	}
	if _, err := os.Stat(ownerFile(RunID())); err != nil {
		t.Errorf("the live run's own owner file was removed: %v", err)
	}
}
