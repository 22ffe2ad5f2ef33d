package sdk_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSDKDependencies keeps the SDK module's build (everything a plugin can
// import from it) free of Kubernetes and OVSDB libraries and of the host.
func TestSDKDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "switchyard.dev/switchyard/sdk/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("implausible dependency list:\n%s", out)
	}
	for _, d := range deps {
		for _, banned := range []string{"k8s.io/", "github.com/ovn-org/libovsdb", "switchyard.dev/switchyard/host", "github.com/spf13/viper"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("the sdk module depends on %s", d)
			}
		}
	}
}
