package controlplane_test

import (
	"net"
	"strings"
	"testing"

	"switchyard.dev/switchyard/itest/controlplane"
	"switchyard.dev/switchyard/itest/testenv"
)

// A port that is already taken must produce one actionable line, not a
// timeout or a page of apiserver log.
func TestPortInUseIsReportedClearly(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	msg := testenv.CaptureFatal(func(tt testenv.T) {
		controlplane.StartWithOptions(tt, controlplane.Options{SecurePort: port})
	})
	if !strings.Contains(msg, "address already in use") || !strings.Contains(msg, "free the port") {
		t.Fatalf("starting on a taken port said %q; want it to say the address is in use and to free the port", msg)
	}
	if strings.Count(msg, "\n") != 0 {
		t.Errorf("message should be one line, got:\n%s", msg)
	}
}
