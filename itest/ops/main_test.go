package ops

import (
	"fmt"
	"os"
	"testing"

	"switchyard.dev/switchyard/itest/build"
)

// bins are built once for every test of the package.
var (
	bins    map[string]string
	binsErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchyard-itest-ops-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins, binsErr = build.Into(dir, "host/cmd/switchyard-agent", "cni/cmd/switchyard-cni", "plugins/podnet", "plugins/tunnel",
		"plugins/testplugins/warden", "host/cmd/yardctl")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
