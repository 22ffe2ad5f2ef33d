package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependsOnSDKOnly proves a plugin importing only the sdk module keeps
// Kubernetes and OVSDB client libraries out of its build.
func TestDependsOnSDKOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !strings.Contains(string(out), "switchyard.dev/switchyard/sdk\n") {
		t.Fatalf("go list -deps returned an implausible list (%d packages):\n%s", len(deps), out)
	}
	for _, d := range deps {
		for _, banned := range []string{"k8s.io/client-go", "k8s.io/apimachinery", "github.com/ovn-org/libovsdb", "switchyard.dev/switchyard/host"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("template plugin depends on %s (via %s)", banned, d)
			}
		}
	}
}
