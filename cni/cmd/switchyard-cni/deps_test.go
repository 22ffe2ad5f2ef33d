package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The runtime executes this binary for every pod ADD and DEL, so what it
// links is start-up time on every pod's critical path: gRPC and protobuf
// alone made it three times the size and about as slow again to start
// (cni/cniwire's doc). Keep them out.
func TestThinBinaryLinksNoRPCStack(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "switchyard.dev/switchyard/cni/cmd/switchyard-cni").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("implausible dependency list:\n%s", out)
	}
	for _, d := range deps {
		for _, banned := range []string{"google.golang.org/grpc", "google.golang.org/protobuf", "switchyard.dev/switchyard/cni/cnipb", "k8s.io/"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("switchyard-cni links %s", d)
			}
		}
	}
}
