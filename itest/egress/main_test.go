package egress

import (
	"fmt"
	"os"
	"testing"

	"switchyard.dev/switchyard/itest/build"
)

// bins are the commands TestMain built once for the package.
var (
	bins    map[string]string
	binsErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchyard-itest-egress-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins, binsErr = build.Into(dir, "host/cmd/switchyard-agent", "cni/cmd/switchyard-cni", "plugins/podnet", "plugins/tunnel", "plugins/egress")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
