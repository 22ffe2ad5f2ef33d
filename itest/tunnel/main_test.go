package tunnel

import (
	"fmt"
	"os"
	"testing"

	"switchyard.dev/switchyard/itest/build"
)

// bins are the commands TestMain built once for every test and benchmark
// of the package (linking four binaries per test would cost more than the
// tests themselves); binsErr says why they are missing.
var (
	bins    map[string]string
	binsErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchyard-itest-tunnel-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins, binsErr = build.Into(dir, "host/cmd/switchyard-agent", "cni/cmd/switchyard-cni", "plugins/podnet", "plugins/tunnel")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
