package realnode_test

import (
	"os"
	"testing"

	"switchyard.dev/switchyard/itest/realnode"
)

// TestMain removes the image archives the tests built once and shared.
func TestMain(m *testing.M) {
	code := m.Run()
	realnode.RemoveBuiltImages()
	os.Exit(code)
}
