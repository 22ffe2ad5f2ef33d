package openflow

import (
	"bytes"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"
)

// ofpPrint hands msg to `ovs-ofctl ofp-print -` (hex on stdin) and
// returns what it printed. ovs-ofctl is the independent witness for
// every golden test; without it the tests fail rather than skip.
func ofpPrint(t testing.TB, msg []byte) string {
	t.Helper()
	path, err := exec.LookPath("ovs-ofctl")
	if err != nil {
		t.Fatalf("ovs-ofctl not found in PATH: install openvswitch-common (the golden tests compare against it): %v", err)
	}
	cmd := exec.Command(path, "ofp-print", "-")
	cmd.Stdin = strings.NewReader(hex.EncodeToString(msg))
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ovs-ofctl ofp-print failed: %v\nstderr: %s\nmessage: %x", err, stderr.String(), msg)
	}
	if stderr.Len() > 0 {
		t.Errorf("ovs-ofctl ofp-print warned: %s", stderr.String())
	}
	return strings.TrimRight(out.String(), "\n")
}
