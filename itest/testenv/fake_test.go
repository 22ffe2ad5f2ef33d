package testenv

import (
	"fmt"
	"strings"
	"testing"
)

func TestLookPathNamesThePackage(t *testing.T) {
	msg := CaptureFatal(func(tt T) { LookPath(tt, "ovs-vswitchd-not-installed", "openvswitch-switch") })
	for _, want := range []string{"ovs-vswitchd-not-installed not found", "apt-get install openvswitch-switch"} {
		if !strings.Contains(msg, want) {
			t.Errorf("LookPath message %q does not contain %q", msg, want)
		}
	}
	if strings.Count(msg, "\n") != 0 {
		t.Errorf("LookPath message should be one line, got %q", msg)
	}
}

func TestNamesAreRunUnique(t *testing.T) {
	a, b := Name("n1"), Name("n2")
	if !strings.HasPrefix(a, Prefix+RunID()) || a == b {
		t.Fatalf("Name gave %q and %q; want distinct names with prefix %q", a, b, Prefix+RunID())
	}
	if len(RunID()) != 6 {
		t.Fatalf("RunID %q should be 6 hex characters", RunID())
	}
}

func TestEventuallyNamesWhatItWaitedFor(t *testing.T) {
	err := Eventually("the moon", 30e6, 5e6, func() error { return fmt.Errorf("not yet") })
	if err == nil || !strings.Contains(err.Error(), "waiting for the moon") || !strings.Contains(err.Error(), "not yet") {
		t.Fatalf("Eventually error = %v; want it to name what it waited for and the last failure", err)
	}
}
